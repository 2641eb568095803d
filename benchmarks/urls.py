from django.urls import path

from benchmarks import views

urlpatterns = [
    path("", views.home, name="home"),
    path("versions/new/", views.version_new, name="version-new"),
    path("versions/<str:name>/", views.version_detail, name="version-detail"),
    path("versions/<str:name>/downloads/<slug:kind>/", views.version_download, name="version-download"),
    path("versions/<str:name>/curate/", views.version_curate, name="version-curate"),
    path("versions/<str:name>/curate/tasks/", views.version_task_add, name="version-task-add"),
    path("versions/<str:name>/curate/tasks/<int:task_id>/split/", views.version_task_split, name="version-task-split"),
    path("versions/<str:name>/curate/tasks/<int:task_id>/drop/", views.version_task_drop, name="version-task-drop"),
    path(
        "versions/<str:name>/curate/snippets/<int:snippet_id>/retire/",
        views.version_snippet_retire,
        name="version-snippet-retire",
    ),
    path("versions/<str:name>/curate/settings/", views.version_settings, name="version-settings"),
    path("versions/<str:name>/publish/", views.version_publish, name="version-publish"),
    path("versions/<str:name>/prepare-downloads/", views.version_downloads_retry, name="version-downloads-retry"),
    path("versions/<str:name>/deprecate/", views.version_deprecate, name="version-deprecate"),
    path("versions/<str:name>/papers/<slug:slug>/", views.paper_detail, name="paper-detail"),
    path("versions/<str:name>/snippets/<int:snippet_id>/masked/", views.snippet_masked, name="snippet-masked"),
]
