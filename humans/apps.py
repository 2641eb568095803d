from django.apps import AppConfig


class HumansConfig(AppConfig):
    name = "humans"

    def ready(self) -> None:
        from benchmarks.pages import page_extra_register
        from humans import views

        # The release pages are benchmarks' and evaluation's; the people's figures on them are this app's.
        page_extra_register("leaderboard", views.leaderboard_humans)
        page_extra_register("difficulty", views.difficulty_humans)
        page_extra_register("paper", views.paper_humans)
        page_extra_register("item", views.item_humans)
