"""Work lost to a fault is found and queued again: every worker looks every RUN_WATCH_SECONDS (a thread of its main
process, so the embedded default has it too) for the unfinished rows of every registered kind of work (runs,
submissions' validations, papers of set validations, releases' downloads) that made no progress for
RUN_REDISPATCH_SECONDS while no task of theirs waits in a queue or is held by a worker. A kind whose messages are
read (runs: on Redis the feeder keeps the queues short, so their own messages are listed) is fed again after
RUN_LOST_SECONDS with no task queued or held. A row lost again after VALIDATION_REDISPATCH_MAX re-dispatches is given
up where its kind says how (its checks become errors of the platform), so it ends and can be run again rather than
block what waits for it. The same thread runs the registered periodic chores (the run feeder tops the running runs
up every RUN_FEED_SECONDS) and says how many slots its worker has (operations/slots.py).

A broker that restarts without persistence loses every queued and unacknowledged message; a task whose database
stayed down past DATABASE_OUTAGE_WAIT_SECONDS gives up. Both leave work that nothing would ever pick up again.
Re-dispatching is safe because results are unique per item (and per check): what is done is skipped.

Each app registers its kinds in its AppConfig.ready() (`work_register`, `chore_register`): this module knows none.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.db.models import F
from django.utils import timezone

from operations import broker
from operations.events import Kind, event_record
from operations.models import Redispatchable
from operations.slots import worker_slots_forget, worker_slots_record

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkKind:
    """One kind of work that a fault can lose, as the watchdog sees it: rows of a Redispatchable model, each worked
    on by tasks whose first argument is the row's id."""

    name: str
    model: type[Redispatchable]
    tasks: frozenset[str]
    unfinished: Callable[[], Iterable[Any]]
    moved_at: Callable[[Any], tuple[datetime | None, ...]]  # creation, last progress (the last re-dispatch is added)
    # Queue it again after a claim; records its own event and returns how many tasks were queued.
    requeue: Callable[..., int]  # (item, idle_seconds=, worker=)
    claimable: dict[str, Any] = field(default_factory=dict)  # what the row must still be to be claimed (a status)
    tasks_of: Callable[[Any], frozenset[str]] | None = None  # the tasks an item may have (default: all of `tasks`)
    give_up: Callable[..., Any] | None = None  # (item, worker=): ends it past VALIDATION_REDISPATCH_MAX; None: no limit
    messages_read: bool = False  # its own messages are read off the queues (not just the queues' lengths)


_kinds: dict[str, WorkKind] = {}
_chores: dict[str, Callable[[], Any]] = {}


def work_register(kind: WorkKind) -> None:
    """Have the watchdog look after `kind` (from the owning app's AppConfig.ready())."""
    _kinds[kind.name] = kind


def work_kinds() -> tuple[WorkKind, ...]:
    return tuple(_kinds.values())


def chore_register(name: str, chore: Callable[[], Any]) -> None:
    """Have the watchdog call `chore` every RUN_FEED_SECONDS (the run feeder)."""
    _chores[name] = chore


def _idle_since(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def redispatch_claim(*, kind: WorkKind, item: Redispatchable) -> bool:
    """Claim `item` for queueing again: one watchdog wins when several look at once, and its count goes up."""
    claimed = kind.model._default_manager.filter(pk=item.pk, redispatched_at=item.redispatched_at, **kind.claimable)
    return bool(claimed.update(redispatched_at=timezone.now(), redispatches=F("redispatches") + 1))


def lost_work_redispatch(*, worker: str = "") -> int:
    """One look: queue again what was lost, one rule for every registered kind; returns how many tasks were queued
    again."""
    now = timezone.now()
    # The kinds whose own messages are read (runs) first, as they were looked after first before the registry.
    kinds = sorted(work_kinds(), key=lambda kind: not kind.messages_read)
    # Read before the workers are asked: a message taken from a queue meanwhile is then held by its worker.
    listed = {kind.name: broker.subjects_queued(kind.tasks) for kind in kinds if kind.messages_read}
    cutoff = now - timedelta(seconds=settings.RUN_REDISPATCH_SECONDS)
    lost_cutoff = now - timedelta(seconds=settings.RUN_LOST_SECONDS)
    idle = [
        (kind, item, moved)
        for kind in kinds
        for item in kind.unfinished()
        if (moved := _idle_since(*kind.moved_at(item), item.redispatched_at) or now)
        < (lost_cutoff if listed.get(kind.name) is not None else cutoff)
    ]
    if not idle:
        return 0
    # Queues first, workers second: a message a worker takes meanwhile is then held (asking the workers waits out
    # their replies, seconds in which a queued message was taken and, read in the other order, seen nowhere).
    waiting, held = broker.queues_waiting(), broker.tasks_held()
    if held is None or waiting is None:  # the broker is down: wait until it can tell what is still queued
        return 0
    redispatched = 0
    for kind, item, moved in idle:
        tasks = kind.tasks_of(item) if kind.tasks_of is not None else kind.tasks
        if any(item.pk in held.get(name, ()) for name in kind.tasks):
            continue
        if listed.get(kind.name) is not None:
            if item.pk in (listed[kind.name] or ()):  # its own messages were read, not just the queues' lengths
                continue
        elif any(waiting.get(q) for q in broker.task_queues(tasks)):
            continue
        if kind.give_up is not None and item.redispatches >= settings.VALIDATION_REDISPATCH_MAX:
            kind.give_up(item, worker=worker)
            continue
        if redispatch_claim(kind=kind, item=item):
            redispatched += kind.requeue(item, idle_seconds=(now - moved).total_seconds(), worker=worker)
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
                logger.warning(
                    "task %s%s lost its database connection (%s); waiting for the database", task.name, args, exc
                )
                if not database_wait(timeout=settings.DATABASE_OUTAGE_WAIT_SECONDS):
                    raise
                _outage_record(
                    since=since, worker=task.request.hostname or "", what=f"{task.name}{tuple(args)}", error=exc
                )

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
    seconds = (timezone.now() - since).total_seconds()
    event_record(
        kind=Kind.DATABASE_UNAVAILABLE,
        worker=worker,
        since=since,
        detail=f"the database connection was lost ({str(error).strip()[:300]}); {what} waited "
        f"{seconds:.0f} s for the database and ran again",
    )


class Watchdog(threading.Thread):
    """The worker's chores and look for lost work, with its own database connection: every RUN_FEED_SECONDS it runs
    the registered chores (the feeder tops the running runs up), every RUN_WATCH_SECONDS it looks for lost work; a
    database outage is logged once when it begins and once when it ends."""

    def __init__(self, *, worker: str, queues: list[str] | None = None, slots: int = 0):
        super().__init__(name="rcb-watchdog", daemon=True)
        self.worker, self.stopped = worker, threading.Event()
        self.queues, self.slots = queues or [], slots
        self.database_lost_at: float | None = None

    def run(self) -> None:
        feed, watch = settings.RUN_FEED_SECONDS, settings.RUN_WATCH_SECONDS
        next_look = time.monotonic() + watch
        self.look(feeding=False, for_lost_work=False)  # the worker's slots count from its start
        connections.close_all()
        while not self.stopped.wait(min(feed, watch) if feed > 0 else watch):
            try:
                self.look(feeding=feed > 0, for_lost_work=time.monotonic() >= next_look)
            finally:
                connections.close_all()
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + watch

    def look(self, *, feeding: bool, for_lost_work: bool) -> None:
        try:
            if self.slots and self.worker:
                worker_slots_record(hostname=self.worker, queues=self.queues, slots=self.slots)
            if feeding:
                for chore in _chores.values():
                    chore()
            if for_lost_work:
                lost_work_redispatch(worker=self.worker)
        except (OperationalError, InterfaceError) as exc:
            if self.database_lost_at is None:
                self.database_lost_at = time.monotonic()
                logger.warning(
                    "the watchdog cannot reach the database (%s); it tries again quietly until it answers",
                    str(exc).strip().splitlines()[0][:200] if str(exc).strip() else exc,
                )
            return
        except Exception:  # another service is down: look again next time
            logger.warning("the watchdog could not look for lost work", exc_info=True)
        if self.database_lost_at is not None:
            logger.warning(
                "the watchdog reaches the database again after %.0f s", time.monotonic() - self.database_lost_at
            )
            self.database_lost_at = None


_watchdog: Watchdog | None = None


def watchdog_start(*, worker: str, queues: list[str] | None = None, slots: int = 0) -> None:
    """Start this worker's watchdog; it says every look that the worker has `slots` processes taking `queues`."""
    global _watchdog
    if settings.RUN_WATCH_SECONDS > 0 and _watchdog is None:
        _watchdog = Watchdog(worker=worker, queues=queues, slots=slots)
        _watchdog.start()


def watchdog_stop() -> None:
    global _watchdog
    if _watchdog is not None:
        _watchdog.stopped.set()
        if _watchdog.slots and _watchdog.worker:
            try:  # its slots leave the feeder's count at once rather than when they go stale
                worker_slots_forget(hostname=_watchdog.worker)
            except (OperationalError, InterfaceError):
                pass
            finally:
                connections.close_all()
        _watchdog = None
