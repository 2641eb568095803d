"""Reads for the operations page: queue lengths and ages, workers, stalled runs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from evaluation.models import EvaluationRun

QUEUES = ("llm", "sandbox", "gpu", "default")


@dataclass(frozen=True)
class QueueStatus:
    name: str
    length: int | None
    oldest_seconds: float | None


def queues_status() -> list[QueueStatus]:
    """Length and age of the oldest task per queue; None where the broker cannot tell (not Redis, or down)."""
    from config.celery import app

    url = app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://")):
        return [QueueStatus(name, None, None) for name in QUEUES]
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    statuses = []
    for name in QUEUES:
        try:
            length = client.llen(name)
            # kombu pushes on the left and workers pop on the right: the oldest message is last.
            oldest = client.lindex(name, -1)
        except redis.RedisError:
            statuses.append(QueueStatus(name, None, None))
            continue
        age = None
        if oldest:
            enqueued = json.loads(oldest).get("headers", {}).get("enqueued_at")
            age = time.time() - enqueued if enqueued else None
        statuses.append(QueueStatus(name, length, age))
    return statuses


@dataclass(frozen=True)
class WorkerStatus:
    name: str
    active: list[str]


def workers_status(timeout: float = 1.0) -> list[WorkerStatus] | None:
    """Workers answering a ping, with their current tasks; None when the broker cannot broadcast."""
    from config.celery import app

    try:
        inspector = app.control.inspect(timeout=timeout)
        active = inspector.active() or {}
    except Exception:  # a broker without broadcast support, or one that is down
        return None
    return [WorkerStatus(name, [f"{t['name']}{tuple(t.get('args', ()))}" for t in tasks])
            for name, tasks in sorted(active.items())]


def gpu_workers(timeout: float = 1.0) -> list[str] | None:
    """Workers answering that consume the `gpu` queue; None when the workers cannot be asked."""
    from config.celery import app
    from evaluation.routing import GPU_QUEUE

    try:
        replies = app.control.inspect(timeout=timeout).active_queues()
    except Exception:  # a broker without broadcast support, or one that is down
        return None
    return sorted(name for name, queues in (replies or {}).items()
                  if any(q.get("name") == GPU_QUEUE for q in queues or ()))


def runs_stalled(*, seconds: int | None = None) -> QuerySet[EvaluationRun]:
    """Running runs with no new result for longer than RUN_STALL_SECONDS."""
    limit = timezone.now() - timedelta(seconds=seconds if seconds is not None else settings.RUN_STALL_SECONDS)
    return (EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, last_progress_at__lt=limit)
            .select_related("model", "version").order_by("last_progress_at"))


def queues_waiting(names: tuple[str, ...] = QUEUES) -> dict[str, int] | None:
    """Messages waiting per queue on any broker Celery's virtual transports serve (Redis, the embedded filesystem
    one); None when the broker does not answer."""
    from config.celery import app

    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            return {name: channel.queue_declare(queue=name, passive=False).message_count for name in names}
    except Exception:  # the broker is down or refuses: nobody can tell what waits
        return None


# Reading a queue whole is cheap while the feeder bounds it; past this many messages nobody is told anything.
QUEUE_READ_MAX = 20_000


def runs_queued(names: tuple[str, ...] = QUEUES) -> frozenset[int] | None:
    """Runs some task of which waits in a queue, read from the messages themselves; None when the broker cannot be
    read so (not Redis, down, or a queue longer than QUEUE_READ_MAX)."""
    import ast

    from config.celery import app

    url = app.conf.broker_url or ""
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    runs: set[int] = set()
    try:
        for name in names:
            if client.llen(name) > QUEUE_READ_MAX:
                return None
            for raw in client.lrange(name, 0, -1):
                headers = json.loads(raw).get("headers", {})
                if headers.get("task") in RUN_TASKS:
                    args = ast.literal_eval(headers.get("argsrepr") or "()")
                    if args:
                        runs.add(int(args[0]))
    except (redis.RedisError, ValueError, SyntaxError):
        return None
    return frozenset(runs)


@dataclass(frozen=True)
class TasksLive:
    """What the workers hold a task for (running, prefetched, or waiting for a retry's countdown)."""

    runs: frozenset[int]
    reports: frozenset[int]
    set_papers: frozenset[int]
    releases: frozenset[int]  # whose downloads a worker builds


RUN_TASKS = {"evaluation.tasks.item_generate", "evaluation.tasks.item_evaluate", "evaluation.tasks.run_dispatch",
             "evaluation.agents.tasks.item_agent"}
REPORT_TASKS = {"submissions.tasks.revision_validate"}
SET_PAPER_TASKS = {"submissions.tasks.set_paper_validate"}
RELEASE_TASKS = {"benchmarks.tasks.release_downloads_prepare"}


def tasks_live(timeout: float = 1.0) -> TasksLive | None:
    """Runs, validation reports, papers of set validations and releases (their downloads) some worker holds a task
    of; None when the workers cannot be asked."""
    from config.celery import app

    runs, reports, set_papers, releases = set(), set(), set(), set()
    try:
        inspector = app.control.inspect(timeout=timeout)
        replies = [inspector.active(), inspector.reserved(), inspector.scheduled()]
    except Exception:  # the broker is down: liveness is unknown, so nothing may be presumed lost
        return None
    if any(reply is None for reply in replies):
        # No worker answered (this one's own consumer too, e.g. while it reconnects): unknown, not "nothing held".
        return None
    for reply in replies:
        for tasks in (reply or {}).values():
            for task in tasks:
                task = task.get("request", task)  # scheduled tasks wrap the request
                args = task.get("args") or ()
                if not args or not isinstance(args, (list, tuple)):
                    continue
                if task.get("name") in RUN_TASKS:
                    runs.add(int(args[0]))
                elif task.get("name") in REPORT_TASKS:
                    reports.add(int(args[0]))
                elif task.get("name") in SET_PAPER_TASKS:
                    set_papers.add(int(args[0]))
                elif task.get("name") in RELEASE_TASKS:
                    releases.add(int(args[0]))
    return TasksLive(frozenset(runs), frozenset(reports), frozenset(set_papers), frozenset(releases))


def events_recent(limit: int = 50):
    """The latest things the platform recovered from by itself, newest first."""
    from evaluation.models import OperationsEvent

    # The fork server's starts are not faults: the operations page shows them per run, beside its cold items.
    return OperationsEvent.objects.exclude(kind=OperationsEvent.Kind.FORKSERVER_STARTED).select_related(
        "run", "report__revision__submission", "set_validation__version")[:limit]
