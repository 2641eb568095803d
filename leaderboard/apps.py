from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"

    def ready(self) -> None:
        from benchmarks.pages import page_extra_register
        from leaderboard import views

        # The release pages are benchmarks'; the results on them are this app's.
        page_extra_register("home", views.home_results)
        page_extra_register("paper", views.paper_difficulty)
        page_extra_register("version", views.release_calibration)
