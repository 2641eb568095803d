"""Environments whose build failed are remembered per hash (with the build's log) for every worker: until a
maintainer retries one from the operations page, items needing it fail at once instead of building it again.

The sandbox layer (executor.session_for) only asks and reports through `build_failures`, handed to it by the
callers that own the database: it never writes a row itself."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from evaluation.models import EnvironmentFailure, EvaluationRun, Outcome
from evaluation.services import run_dispatch

# How an item's outcome begins when its environment could not be built (so a retry finds those items again).
ENVIRONMENT_FAILED = "environment could not be built"


def environment_failure(*, env_hash: str) -> EnvironmentFailure | None:
    """The remembered failed build of this environment, if any."""
    return EnvironmentFailure.objects.filter(environment_hash=env_hash).first()


def environment_failures() -> QuerySet[EnvironmentFailure]:
    """Remembered failed builds, newest first, for the operations page."""
    return EnvironmentFailure.objects.order_by("-failed_at")


def environment_failure_record(
    *, env_hash: str, requirements: str, backend: str, message: str, log: str
) -> EnvironmentFailure:
    """Remember that this environment failed to build (the latest failure wins), so nobody builds it again for now."""
    failure, _ = EnvironmentFailure.objects.update_or_create(
        environment_hash=env_hash,
        defaults={
            "requirements": requirements,
            "backend": backend,
            "message": message[:2000],
            "log": log[-200_000:],
            "failed_at": timezone.now(),
        },
    )
    return failure


@dataclass(frozen=True)
class BuildFailures:
    """What the executor asks before building an environment, and tells when a build failed (executor.session_for):
    the remembered failures in the database."""

    def remembered(self, env_hash: str) -> EnvironmentFailure | None:
        return environment_failure(env_hash=env_hash)

    def failed(self, *, env_hash: str, requirements: str, backend: str, message: str, log: str) -> None:
        environment_failure_record(
            env_hash=env_hash, requirements=requirements, backend=backend, message=message, log=log
        )


build_failures = BuildFailures()


def environment_retry(*, failure: EnvironmentFailure) -> int:
    """Forget a failed build and evaluate again the items it failed: their runs resume; returns how many runs."""
    with transaction.atomic():
        EnvironmentFailure.objects.filter(pk=failure.pk).delete()
        outcomes = Outcome.objects.filter(
            environment_hash=failure.environment_hash,
            status=Outcome.Status.ERROR,
            category=Outcome.Category.INFRASTRUCTURE,
            detail__startswith=ENVIRONMENT_FAILED,
            run__status__in=[EvaluationRun.Status.RUNNING, EvaluationRun.Status.COMPLETED],
        )
        run_ids = set(outcomes.values_list("run_id", flat=True))
        Outcome.objects.filter(pk__in=list(outcomes.values_list("pk", flat=True))).delete()
        EvaluationRun.objects.filter(pk__in=run_ids).update(status=EvaluationRun.Status.RUNNING, finished_at=None)
    for run in EvaluationRun.objects.filter(pk__in=run_ids):
        run_dispatch(run=run)
    return len(run_ids)
