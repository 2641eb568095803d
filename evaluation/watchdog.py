"""Work lost to a fault is found and queued again: every worker looks every RUN_WATCH_SECONDS (a thread of its main
process, so the embedded default has it too) for runs, submissions' validations, papers of set validations and
releases' downloads that made no progress for RUN_REDISPATCH_SECONDS while no task of theirs waits in a queue or is
held by a worker. Runs are read closer: on Redis their own messages are listed (the feeder keeps the queues short),
so a run with no task queued or held for RUN_LOST_SECONDS is fed again within seconds. A validation lost again after
VALIDATION_REDISPATCH_MAX re-dispatches is given up (its checks become errors of the platform), so it ends and can be
run again rather than block what waits for it. The same thread is the feeder: it tops the running runs up.

A broker that restarts without persistence loses every queued and unacknowledged message; a task whose database
stayed down past DATABASE_OUTAGE_WAIT_SECONDS gives up. Both leave work that nothing would ever pick up again.
Re-dispatching is safe because results are unique per item (and per check): what is done is skipped.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone

if TYPE_CHECKING:
    from evaluation.operations import TasksLive

logger = logging.getLogger(__name__)


def _idle_since(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None


@dataclass(frozen=True)
class Watched:
    """One kind of work that a fault can lose, as the watchdog sees it."""

    unfinished: Callable[[], Iterable[Any]]
    moved_at: Callable[[Any], tuple[datetime | None, ...]]  # creation, last progress, last re-dispatch
    held: Callable[[TasksLive, Any], bool]  # some worker runs, prefetched or schedules a task of it
    queues: Callable[[Any], tuple[str, ...]]  # where its tasks would wait
    redispatch: Callable[..., int]  # (item, idle_seconds=, worker=) -> how many tasks were queued again
    # How often it was queued again, and what ends it once that reached VALIDATION_REDISPATCH_MAX; None: no limit.
    redispatches: Callable[[Any], int] | None = None
    give_up: Callable[..., None] | None = None  # (item, worker=)


def _watched() -> tuple[Watched, ...]:
    from benchmarks import services as benchmark_services
    from evaluation import services
    from evaluation.models import EvaluationRun
    from submissions import services as submission_services
    from submissions import validation as set_validation

    runs = Watched(
        unfinished=lambda: EvaluationRun.objects.filter(status__in=[EvaluationRun.Status.QUEUED,
                                                                    EvaluationRun.Status.RUNNING])
        .select_related("model", "version").defer("version__manifest", "version__changelog"),
        moved_at=lambda run: (run.created_at, run.last_progress_at, run.redispatched_at),
        held=lambda live, run: run.pk in live.runs,
        # A GPU task's items wait on `gpu` (for a GPU worker, maybe none yet): waiting there is not lost.
        queues=lambda run: ("llm", "sandbox", "gpu", "default") if run.model.kind == run.model.Kind.LITELLM
        else ("sandbox", "gpu", "default"),
        redispatch=lambda run, **kw: services.run_redispatch_lost(run=run, **kw))
    reports = Watched(
        unfinished=submission_services.validations_unfinished,
        moved_at=lambda report: (report.revision.created_at, report.started_at,
                                 submission_services.validation_redispatched_at(report=report)),
        held=lambda live, report: report.pk in live.reports,
        queues=lambda report: ("sandbox",),
        redispatch=lambda report, idle_seconds, worker: submission_services.validation_redispatch_lost(
            report=report, worker=worker),
        redispatches=lambda report: submission_services.validation_redispatches(report=report),
        give_up=lambda report, worker: submission_services.validation_give_up(report=report, worker=worker))
    set_papers = Watched(
        unfinished=set_validation.set_papers_unfinished,
        moved_at=lambda paper: (paper.validation.created_at, paper.started_at, paper.redispatched_at),
        held=lambda live, paper: paper.pk in live.set_papers,
        queues=lambda paper: ("sandbox",),
        redispatch=lambda paper, idle_seconds, worker: set_validation.set_paper_redispatch_lost(
            paper=paper, idle_seconds=idle_seconds, worker=worker),
        redispatches=lambda paper: paper.redispatches,
        give_up=lambda paper, worker: set_validation.set_paper_give_up(paper=paper, worker=worker))
    releases = Watched(
        unfinished=benchmark_services.releases_downloads_pending,
        moved_at=lambda version: (version.published_at, version.downloads_queued_at),
        held=lambda live, version: version.pk in live.releases,
        queues=lambda version: ("default",),
        redispatch=_release_downloads_redispatch)
    return runs, reports, set_papers, releases


def _release_downloads_redispatch(version, *, idle_seconds: float, worker: str) -> int:
    from benchmarks import services as benchmark_services
    from evaluation import services
    from evaluation.models import OperationsEvent

    if not benchmark_services.release_downloads_redispatch_lost(version=version):
        return 0
    services.event_record(kind=OperationsEvent.Kind.DOWNLOADS_REDISPATCHED, worker=worker,
                          detail=f"the downloads of release {version.name} were being prepared with no queued or "
                                 f"running task after {idle_seconds:.0f} s; their build was queued again")
    return 1


def lost_work_redispatch(*, worker: str = "") -> int:
    """One look: queue again what was lost (runs, submissions' validations, papers of set validations, releases'
    downloads), one rule for all; returns how many tasks were queued again."""
    from evaluation.operations import queues_waiting, runs_queued, tasks_live

    now = timezone.now()
    # Read before the workers are asked: a message taken from a queue meanwhile is then held by its worker.
    listed = runs_queued()
    kinds = _watched()
    cutoff = now - timedelta(seconds=settings.RUN_REDISPATCH_SECONDS)
    run_cutoff = now - timedelta(seconds=settings.RUN_LOST_SECONDS) if listed is not None else cutoff
    idle = [(kind, item, moved) for kind in kinds for item in kind.unfinished()
            if (moved := _idle_since(*kind.moved_at(item)) or now) < (run_cutoff if kind is kinds[0] else cutoff)]
    if not idle:
        return 0
    live, waiting = tasks_live(), queues_waiting()
    if live is None or waiting is None:  # the broker is down: wait until it can tell what is still queued
        return 0
    redispatched = 0
    for kind, item, moved in idle:
        if kind.held(live, item):
            continue
        if kind is kinds[0] and listed is not None:
            if item.pk in listed:  # runs: their own messages were read, not just the queues' lengths
                continue
        elif any(waiting.get(q) for q in kind.queues(item)):
            continue
        if kind.give_up is not None and kind.redispatches(item) >= settings.VALIDATION_REDISPATCH_MAX:
            kind.give_up(item, worker=worker)
            continue
        redispatched += kind.redispatch(item, idle_seconds=(now - moved).total_seconds(), worker=worker)
    return redispatched


def database_outage_outlasted(body):
    """Decorates a bound Celery task: when its database connection is lost, wait for the database (up to
    DATABASE_OUTAGE_WAIT_SECONDS), record the outage and run the task again in place (tasks are idempotent), so
    its message is neither lost nor needs the broker; past the wait it fails and the watchdog finds its work."""

    @functools.wraps(body)
    def wrapper(task, *args, **kwargs):
        while True:
            try:
                return body(task, *args, **kwargs)
            except (OperationalError, InterfaceError) as exc:
                if not _connection_lost():
                    raise  # e.g. a lock timeout: the database answers, so this is not an outage
                since = timezone.now()
                logger.warning("task %s%s lost its database connection (%s); waiting for the database",
                               task.name, args, exc)
                if not database_wait(timeout=settings.DATABASE_OUTAGE_WAIT_SECONDS):
                    raise
                _outage_record(since=since, worker=task.request.hostname or "", what=f"{task.name}{tuple(args)}",
                               error=exc)

    return wrapper


def _connection_lost() -> bool:
    conn = connections["default"]
    return conn.connection is None or not conn.is_usable()


def database_wait(*, timeout: float) -> bool:
    """Reconnect until the database answers (True) or `timeout` seconds pass (False)."""
    deadline, pause = time.monotonic() + timeout, 0.5
    while True:
        for conn in connections.all(initialized_only=True):
            try:
                conn.close()
            except Exception:  # closing a dead connection may fail too; it is dropped either way
                conn.connection = None
        try:
            connections["default"].ensure_connection()
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except (OperationalError, InterfaceError):
            if time.monotonic() + pause > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def _outage_record(*, since: datetime, worker: str, what: str, error: Exception) -> None:
    from evaluation import services
    from evaluation.models import OperationsEvent

    seconds = (timezone.now() - since).total_seconds()
    services.event_record(kind=OperationsEvent.Kind.DATABASE_UNAVAILABLE, worker=worker, since=since,
                          detail=f"the database connection was lost ({str(error).strip()[:300]}); {what} waited "
                                 f"{seconds:.0f} s for the database and ran again")


class Watchdog(threading.Thread):
    """The worker's feeder and look for lost work, with its own database connection: every RUN_FEED_SECONDS it tops
    the running runs up (services.runs_feed), every RUN_WATCH_SECONDS it looks for lost work; a database outage is
    logged once when it begins and once when it ends."""

    def __init__(self, *, worker: str):
        super().__init__(name="rcb-watchdog", daemon=True)
        self.worker, self.stopped = worker, threading.Event()
        self.database_lost_at: float | None = None

    def run(self) -> None:
        feed, watch = settings.RUN_FEED_SECONDS, settings.RUN_WATCH_SECONDS
        next_look = time.monotonic() + watch
        while not self.stopped.wait(min(feed, watch) if feed > 0 else watch):
            try:
                self.look(feeding=feed > 0, for_lost_work=time.monotonic() >= next_look)
            finally:
                connections.close_all()
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + watch

    def look(self, *, feeding: bool, for_lost_work: bool) -> None:
        from evaluation import services

        try:
            if feeding:
                services.runs_feed()
            if for_lost_work:
                lost_work_redispatch(worker=self.worker)
        except (OperationalError, InterfaceError) as exc:
            if self.database_lost_at is None:
                self.database_lost_at = time.monotonic()
                logger.warning("the watchdog cannot reach the database (%s); it tries again quietly until it "
                               "answers", str(exc).strip().splitlines()[0][:200] if str(exc).strip() else exc)
            return
        except Exception:  # another service is down: look again next time
            logger.warning("the watchdog could not look for lost work", exc_info=True)
        if self.database_lost_at is not None:
            logger.warning("the watchdog reaches the database again after %.0f s",
                           time.monotonic() - self.database_lost_at)
            self.database_lost_at = None


_watchdog: Watchdog | None = None


def watchdog_start(*, worker: str) -> None:
    global _watchdog
    if settings.RUN_WATCH_SECONDS > 0 and _watchdog is None:
        _watchdog = Watchdog(worker=worker)
        _watchdog.start()


def watchdog_stop() -> None:
    global _watchdog
    if _watchdog is not None:
        _watchdog.stopped.set()
        _watchdog = None
