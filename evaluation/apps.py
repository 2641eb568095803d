from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"

    def ready(self) -> None:
        from django.conf import settings
        from django.urls import reverse

        from sandbox.config import settings_use

        settings_use(settings)  # the sandbox package knows no Django: it reads the settings it is given

        from benchmarks.models import BenchmarkVersion
        from benchmarks.pages import page_extra_register
        from benchmarks.services.publishing import release_prepare_wanted, version_published
        from evaluation import preparation, views
        from evaluation.models import EvaluationRun, ModelEntry, TaskPreparation
        from evaluation.routing import (
            AGENT_TURN,
            ITEM_AGENT,
            ITEM_EVALUATE,
            ITEM_GENERATE,
            PREPARE_TASK,
            RUN_DISPATCH,
        )
        from evaluation.services import (
            RUN_ACTIVE,
            calibration_runs_start,
            continuous_runs_start,
            run_requeue,
            runs_feed,
            runs_unfinished,
        )
        from operations.events import Subject, subjects_register
        from operations.watchdog import WorkKind, chore_register, work_register

        version_published.connect(
            continuous_runs_start, sender=BenchmarkVersion, dispatch_uid="evaluation.continuous_runs_start"
        )
        # A release's import and publish have the workers prepare its tasks; lost preparations are queued again.
        release_prepare_wanted.connect(
            preparation.release_prepare_on_commit, sender=BenchmarkVersion, dispatch_uid="evaluation.release_prepare"
        )
        page_extra_register("version", views.release_preparation_section)
        work_register(
            WorkKind(
                name="task preparations",
                model=TaskPreparation,
                tasks=frozenset({PREPARE_TASK}),
                unfinished=preparation.preparations_unfinished,
                moved_at=lambda p: (p.queued_at, p.started_at),
                claimable={"status__in": preparation.ACTIVE},
                requeue=preparation.preparation_requeue,
                give_up=preparation.preparation_give_up,
            )
        )
        # A release's reference lines start by themselves: without them its leaderboard is empty and the home page
        # stays on the release before (leaderboard.selectors.releases.leaderboard_releases).
        version_published.connect(
            calibration_runs_start, sender=BenchmarkVersion, dispatch_uid="evaluation.calibration_runs_start"
        )
        from evaluation.tasks import harbor_dataset_queue

        # A release's public split as a Harbor dataset, a download of its own built by a sandbox worker.
        version_published.connect(
            harbor_dataset_queue, sender=BenchmarkVersion, dispatch_uid="evaluation.harbor_dataset_queue"
        )
        # Runs are lost work the watchdog looks after; their messages are read off the queues (the feeder keeps the
        # queues short), so a lost run is fed again within RUN_LOST_SECONDS.
        run_tasks = frozenset(
            {
                ITEM_GENERATE,
                ITEM_EVALUATE,
                RUN_DISPATCH,
                ITEM_AGENT,
                AGENT_TURN,
            }
        )
        work_register(
            WorkKind(
                name="runs",
                model=EvaluationRun,
                tasks=run_tasks,
                unfinished=runs_unfinished,
                moved_at=lambda run: (run.created_at, run.last_progress_at),
                claimable={"status__in": RUN_ACTIVE},
                requeue=run_requeue,
                messages_read=True,
                # A GPU task's items wait on `gpu` (for a GPU worker, maybe none yet): waiting there is not lost.
                tasks_of=lambda run: (
                    run_tasks if run.model.kind == ModelEntry.Kind.LITELLM else run_tasks - {ITEM_GENERATE}
                ),
            )
        )
        chore_register("runs_feed", runs_feed)
        subjects_register(
            EvaluationRun,
            lambda ids: {
                pk: Subject(f"run {pk}", reverse("run-detail", args=[pk]))
                for pk in EvaluationRun.objects.filter(pk__in=ids).values_list("pk", flat=True)
            },
        )
