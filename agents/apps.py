from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"

    def ready(self) -> None:
        # Its tasks registered in every process: they keep their names from before the move (evaluation/routing.py),
        # under which operations.enqueue.task_named could not import their module.
        from agents import loop, selectors, start, tasks, uploads  # noqa: F401
        from agents.budget import amount_text, release_maximums
        from evaluation.routing import ITEM_AGENT
        from evaluation.run_modes import RunMode, run_mode_register

        # Evaluation's services, pages and commands find the agent mode here, never importing this app.
        run_mode_register(
            RunMode(
                name="agent",
                item_task=ITEM_AGENT,
                settings=start.agent_run_settings,
                restart=loop.trajectories_restart,
                upload_line_parser=uploads.upload_line_parser,
                uploads_store=uploads.trajectories_store,
                run_summary=selectors.agent_run_summary,
                budget_maximums=lambda release: release_maximums(release).as_dict(),
                amount_text=amount_text,
            )
        )
