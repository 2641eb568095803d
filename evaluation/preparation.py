"""A release's tasks prepared before any run: each task revision's test manifest and recording (judging/sealed.py)
are made on the workers when a release holding it is imported, validated or published, one Celery task per task on
the `sandbox` queue (the `gpu` queue for a task that needs one), in parallel; the release page shows how far they
got. A run never makes them when they exist, and one that starts before they do still makes them on its first item
(executor.task_manifest, task_recording).

RELEASE_PREPARE off (the test suite, which imports many releases) queues nothing: runs make them as before."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from benchmarks.models import BenchmarkVersion, Task
from common.text import storable
from evaluation.environments import build_failures
from evaluation.executor import backend_current, limits_default, limits_for_release, task_prepare
from evaluation.models import TaskPreparation
from evaluation.routing import PREPARE_TASK
from operations.enqueue import enqueue
from operations.events import Kind, event_record
from sandbox import EnvironmentBuildError

logger = logging.getLogger(__name__)

Status = TaskPreparation.Status
ACTIVE = [Status.QUEUED, Status.RUNNING]  # selectors.monitoring.PREPARING


def _unprepared(version: BenchmarkVersion):
    return version.tasks.filter(Q(test_manifest__isnull=True) | Q(recording__isnull=True))


def release_prepare(*, version: BenchmarkVersion) -> int:
    """Queue the preparation of every task of `version` whose manifest or recording is missing and that is not
    being prepared already (a failed one is tried again); returns how many were queued. Call it outside a
    transaction, or through `release_prepare_on_commit`: the workers must see the rows."""
    if not settings.RELEASE_PREPARE:
        return 0
    now = timezone.now()
    queued: list[TaskPreparation] = []
    with transaction.atomic():
        for task in _unprepared(version).select_for_update(of=("self",)).order_by("pk"):
            preparation, created = TaskPreparation.objects.get_or_create(
                task=task, defaults={"version": version, "queued_at": now}
            )
            if not created and preparation.status in ACTIVE:
                continue
            if not created:  # prepared once but a manifest or recording is gone again, or it failed: once more
                preparation.version, preparation.status, preparation.detail = version, Status.QUEUED, ""
                preparation.queued_at, preparation.started_at, preparation.finished_at = now, None, None
                preparation.save()
            queued.append(preparation)
    for preparation in queued:
        preparation_queue(preparation=preparation)
    return len(queued)


def release_prepare_on_commit(*, version: BenchmarkVersion, **_: object) -> None:
    """The receiver of a release's import and publish (benchmarks' signals): prepare once they are committed (with
    RELEASE_PREPARE off, nothing is left to run at the commit)."""
    if settings.RELEASE_PREPARE:
        transaction.on_commit(lambda: release_prepare(version=version))


def preparation_queue(*, preparation: TaskPreparation) -> bool:
    return enqueue(
        PREPARE_TASK,
        preparation.pk,
        subject=preparation.version,
        refused=lambda exc: (
            f"the preparation of task {preparation.task_id} could not be queued ({exc}); the watchdog queues it "
            "once the broker answers, and a run before then makes its manifest itself"
        ),
    )


def preparation_run(*, preparation_id: int) -> str:
    """Make one task's manifest and recording (a redelivered copy of a finished one does nothing); returns its
    status. SandboxError propagates (the Celery task retries it)."""
    started = timezone.now()
    if not TaskPreparation.objects.filter(pk=preparation_id, status__in=ACTIVE).update(
        status=Status.RUNNING, started_at=started
    ):
        return TaskPreparation.objects.filter(pk=preparation_id).values_list("status", flat=True).first() or ""
    preparation = TaskPreparation.objects.select_related("version").get(pk=preparation_id)
    task = Task.objects.get(pk=preparation.task_id)
    limits = limits_for_release(preparation.version) if preparation.version else limits_default()
    try:
        why = task_prepare(task=task, limits=limits, failures=build_failures)
    except EnvironmentBuildError as exc:
        why = f"its environment could not be built: {exc}"
    return _finish(preparation_id=preparation_id, why=why, backend=backend_current().name)


def preparation_fail(*, preparation_id: int, detail: str) -> None:
    """The platform failed on it (the sandbox after retries, a lost task): runs make the manifest themselves."""
    _finish(preparation_id=preparation_id, why=f"the platform failed: {detail}")


def _finish(*, preparation_id: int, why: str, backend: str = "") -> str:
    status = Status.FAILED if why else Status.PREPARED
    TaskPreparation.objects.filter(pk=preparation_id, status__in=ACTIVE).update(
        status=status, detail=storable(why[:4000]), finished_at=timezone.now(), backend=backend
    )
    return status


def preparations_unfinished() -> list[TaskPreparation]:
    """Preparations queued or running (the watchdog's to look after when their task is lost)."""
    return list(TaskPreparation.objects.filter(status__in=ACTIVE))


def preparation_requeue(preparation: TaskPreparation, *, idle_seconds: float, worker: str = "") -> int:
    event_record(
        kind=Kind.PREPARATION_REDISPATCHED,
        subject=preparation.version,
        worker=worker,
        detail=f"the preparation of task {preparation.task_id} was {preparation.status} with no queued or running "
        f"task after {idle_seconds:.0f} s; it was queued again",
    )
    TaskPreparation.objects.filter(pk=preparation.pk).update(status=Status.QUEUED)
    return int(preparation_queue(preparation=preparation))


def preparation_give_up(item: TaskPreparation, *, worker: str = "") -> None:
    preparation_fail(
        preparation_id=item.pk,
        detail=f"the workers lost its task {item.redispatches + 1} times (a broker or worker failure)",
    )
