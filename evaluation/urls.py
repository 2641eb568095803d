"""Model and run pages."""

from django.urls import path

from evaluation import views

urlpatterns = [
    path("models/", views.my_models, name="my-models"),
    path("runs/", views.my_runs, name="my-runs"),
    path("models/new/", views.model_new, name="model-new"),
    path("models/<slug:name>/", views.model_detail, name="model-detail"),
    path("models/<slug:name>/edit/", views.model_edit, name="model-edit"),
    path("models/<slug:name>/runs/", views.run_new, name="run-new"),
    path("models/<slug:name>/uploads/", views.run_upload, name="run-upload"),
    path("models/<slug:name>/harbor/", views.run_harbor_import, name="run-harbor-import"),
    path("models/<slug:name>/parity/<str:release>/", views.model_parity, name="model-parity"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/items/<int:outcome_pk>/", views.run_item, name="run-item"),
    path("runs/<int:pk>/progress/", views.run_progress, name="run-progress"),
    path("runs/<int:pk>/verify/", views.run_verify, name="run-verify"),
    path("runs/<int:pk>/cancel/", views.run_cancel_own, name="run-cancel"),
    path("runs/<int:pk>/resume/", views.run_resume_own, name="run-resume-own"),
    path("runs/<int:pk>/pin/", views.run_pin, name="run-pin"),
    path("runs/<int:pk>/manifest.json", views.run_manifest, name="run-manifest"),
    path("runs/<int:pk>/outcomes/<int:outcome_pk>/review/", views.outcome_review, name="outcome-review"),
    path("review/flags/", views.flag_queue, name="flag-queue"),
    path("operations/", views.operations, name="operations"),
    path("operations/runs/<int:pk>/resume/", views.run_resume, name="run-resume"),
    path("operations/environments/<int:pk>/retry/", views.environment_retry, name="environment-retry"),
]
