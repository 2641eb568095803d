from django.urls import path

from benchmarks import views

urlpatterns = [
    path("", views.home, name="home"),
    path("versions/<str:name>/", views.version_detail, name="version-detail"),
    path("versions/<str:name>/papers/<slug:slug>/", views.paper_detail, name="paper-detail"),
    path("versions/<str:name>/snippets/<int:snippet_id>/masked/", views.snippet_masked, name="snippet-masked"),
]
