"""The human baseline's pages."""

from django.urls import path

from humans import views

urlpatterns = [
    path("versions/<str:name>/humans/", views.release_humans, name="release-humans"),
    path("versions/<str:name>/humans/listing/", views.listing_set, name="human-listing"),
    path("versions/<str:name>/attempts/", views.attempt_open, name="attempt-open"),
    path("versions/<str:name>/papers/<slug:slug>/reference/", views.reference_show, name="reference-show"),
    path("attempts/<int:pk>/", views.attempt_detail, name="attempt-detail"),
    path("attempts/<int:pk>/pause/", views.attempt_pause, name="attempt-pause"),
    path("attempts/<int:pk>/resume/", views.attempt_resume, name="attempt-resume"),
    path("attempts/<int:pk>/abandon/", views.attempt_abandon, name="attempt-abandon"),
    path("attempts/<int:pk>/exclude/", views.attempt_exclude, name="attempt-exclude"),
    path("attempts/<int:pk>/flag-review/", views.attempt_flag_review, name="attempt-flag-review"),
]
