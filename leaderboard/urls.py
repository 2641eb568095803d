"""The read side's pages: a release's leaderboard, two runs compared, its snippets by difficulty."""

from django.urls import path

from leaderboard import views

urlpatterns = [
    path("leaderboard/", views.leaderboard_latest, name="leaderboard-latest"),
    path("versions/<str:name>/leaderboard/", views.leaderboard, name="leaderboard"),
    path("versions/<str:name>/compare/", views.release_compare, name="release-compare"),
    path("versions/<str:name>/difficulty/", views.release_difficulty, name="release-difficulty"),
]
