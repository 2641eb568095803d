"""Public leaderboard, model and run pages."""

urlpatterns: list = []
