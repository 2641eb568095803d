"""What the operations page and a release page watch: fork servers, stalled runs, task preparation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import (
    Count,
    QuerySet,
)
from django.utils import timezone

from benchmarks.models import BenchmarkVersion
from evaluation.models import (
    EvaluationRun,
    TaskPreparation,
)
from operations.events import Kind, events_of


@dataclass(frozen=True)
class RunForkServer:
    """What the fork server did for a run: items warm and cold, each start with its reason, and where it went cold."""

    items_warm: int
    items_cold: int
    starts: list[dict]
    cold: list[dict]

    @property
    def start_reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for start in self.starts:
            counts[start["reason"]] = counts.get(start["reason"], 0) + 1
        return counts

    def as_dict(self, *, details: bool) -> dict:
        """For the manifest; without `details`, only each event's reason and time: its detail can name a held-out
        task's imports, and its environment hash confirm a guess at a held-out task's requirements."""

        def shown(event: dict) -> dict:
            return event if details else {k: v for k, v in event.items() if k in ("reason", "at")}

        return {
            "items_warm": self.items_warm,
            "items_cold": self.items_cold,
            "start_reasons": self.start_reasons,
            "starts": [shown(s) for s in self.starts],
            "cold": [shown(c) for c in self.cold],
        }


def run_forkserver(*, run: EvaluationRun) -> RunForkServer:
    counts = dict(run.outcomes.exclude(forked=None).values_list("forked").annotate(n=Count("pk")))
    events = events_of(subject=run, kinds=[Kind.FORKSERVER_STARTED, Kind.FORKSERVER_COLD]).order_by("created_at", "pk")
    starts, cold = [], []
    for event in events:
        where, _, what = event.detail.partition(": ")
        if event.kind == Kind.FORKSERVER_STARTED:
            starts.append(
                {
                    "worker": event.worker,
                    "environment": where,
                    "reason": what.split(":", 1)[0],
                    "detail": what,
                    "at": event.created_at.isoformat(),
                }
            )
        else:
            cold.append(
                {"worker": event.worker, "environment": where, "detail": what, "at": event.created_at.isoformat()}
            )
    return RunForkServer(items_warm=counts.get(True, 0), items_cold=counts.get(False, 0), starts=starts, cold=cold)


def runs_forkserver_recent(*, limit: int = 10) -> list[tuple[EvaluationRun, RunForkServer]]:
    """The latest runs whose items went through a fork server, with what it did, for the operations page."""
    runs = (
        EvaluationRun.objects.filter(outcomes__forked__isnull=False)
        .distinct()
        .select_related("model", "version")
        .order_by("-pk")[:limit]
    )
    return [(run, run_forkserver(run=run)) for run in runs]


def runs_stalled(*, seconds: int | None = None) -> QuerySet[EvaluationRun]:
    """Running runs with no new result for longer than RUN_STALL_SECONDS."""
    limit = timezone.now() - timedelta(seconds=seconds if seconds is not None else settings.RUN_STALL_SECONDS)
    return (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, last_progress_at__lt=limit)
        .select_related("model", "version")
        .order_by("last_progress_at")
    )


PREPARING = (TaskPreparation.Status.QUEUED, TaskPreparation.Status.RUNNING)


@dataclass(frozen=True)
class ReleasePreparation:
    """How far a release's tasks are prepared, for its page."""

    tasks: int
    prepared: int
    pending: int  # queued or running
    failed: list[tuple[str, str]]  # (paper, why), for maintainers

    @property
    def done(self) -> bool:
        return self.pending == 0


def release_preparation(*, version: BenchmarkVersion) -> ReleasePreparation | None:
    """The release's preparation; None when none was ever asked for (RELEASE_PREPARE off, or before it existed)."""
    preparations = TaskPreparation.objects.filter(task__memberships__version=version)
    if not preparations.exists():
        return None
    ready = {"test_manifest__isnull": False, "recording__isnull": False}
    failed = (
        preparations.filter(status=TaskPreparation.Status.FAILED)
        .exclude(**{f"task__{k}": v for k, v in ready.items()})
        .order_by("task__paper__slug")
        .values_list("task__paper__slug", "detail")
    )
    return ReleasePreparation(
        tasks=version.tasks.count(),
        prepared=version.tasks.filter(**ready).count(),
        pending=preparations.filter(status__in=PREPARING).count(),
        failed=list(failed),
    )
