from django.urls import path

from submissions import views

urlpatterns = [
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/name/", views.account_name, name="account-name"),
    path("submissions/", views.submission_list, name="submission-list"),
    path("submissions/new/", views.submission_new, name="submission-new"),
    path("submissions/<int:pk>/", views.submission_detail, name="submission-detail"),
    path("submissions/<int:pk>/r<int:number>/", views.submission_revision, name="submission-revision"),
    path("submissions/<int:pk>/report/", views.submission_report, name="submission-report"),
    path("submissions/<int:pk>/edit/<slug:step>/", views.submission_step, name="submission-step"),
    path("submissions/<int:pk>/comments/", views.comment_create, name="comment-create"),
    path("submissions/<int:pk>/answers/", views.answer_try, name="answer-try"),
    path("submissions/<int:pk>/answers/list/", views.tried_answers, name="tried-answers"),
    path("submissions/<int:pk>/proposed-tests.zip", views.proposed_tests, name="proposed-tests"),
    path("submissions/<int:pk>/<slug:action>/", views.submission_action, name="submission-action"),
    path("versions/<str:name>/validate/", views.version_validate, name="version-validate"),
    path("versions/<str:name>/validation/", views.version_validation, name="version-validation"),
    path("review/", views.review_queue, name="review-queue"),
    path("review/<int:pk>/", views.review_detail, name="review-detail"),
]
