"""What the broker and the workers say: queue lengths and ages, workers and their tasks, which rows some worker
holds a task of, and which runs' messages wait. The queues are those of CELERY_TASK_ROUTES (a router there names the
queues it may add in its `queues` attribute), so they are stated once."""

from __future__ import annotations

import ast
import json
import time
from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string


def task_routes() -> dict[str, tuple[str, ...]]:
    """Task name -> the queues its messages may wait on, read from CELERY_TASK_ROUTES."""
    table = settings.CELERY_TASK_ROUTES
    routers = [
        import_string(entry) if isinstance(entry, str) else entry
        for entry in (table if isinstance(table, (list, tuple)) else (table,))
    ]
    routes: dict[str, tuple[str, ...]] = {}
    # The tables first, then what routers may add: a task's usual queue comes first.
    for router in [r for r in routers if isinstance(r, dict)] + [r for r in routers if not isinstance(r, dict)]:
        pairs = (
            [(name, (route["queue"],)) for name, route in router.items()]
            if isinstance(router, dict)
            else list(getattr(router, "queues", {}).items())
        )
        for name, queues in pairs:
            routes[name] = tuple(dict.fromkeys((*routes.get(name, ()), *queues)))
    return routes


def queues_all() -> tuple[str, ...]:
    """Every queue a task of this site may wait on, in the order of CELERY_TASK_ROUTES, the default queue last."""
    default = settings.CELERY_TASK_DEFAULT_QUEUE
    return (*dict.fromkeys(q for queues in task_routes().values() for q in queues if q != default), default)


def task_queues(tasks) -> tuple[str, ...]:
    """Where the messages of `tasks` may wait (a task not in the routes waits on the default queue)."""
    routes = task_routes()
    return tuple(dict.fromkeys(q for name in tasks for q in routes.get(name, (settings.CELERY_TASK_DEFAULT_QUEUE,))))


def celery_app():
    """The project's Celery app, named by OPERATIONS_CELERY_APP (not celery's current_app: that one is per thread,
    and the watchdog's thread would get celery's default app)."""
    return import_string(settings.OPERATIONS_CELERY_APP)


def _redis_url() -> str:
    url = celery_app().conf.broker_url or ""
    return url if url.startswith(("redis://", "rediss://")) else ""


@dataclass(frozen=True)
class QueueStatus:
    name: str
    length: int | None
    oldest_seconds: float | None


def queues_status() -> list[QueueStatus]:
    """Length and age of the oldest task per queue; None where the broker cannot tell (not Redis, or down)."""
    queues = queues_all()
    url = _redis_url()
    if not url:
        return [QueueStatus(name, None, None) for name in queues]
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    statuses = []
    for name in queues:
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
    try:
        inspector = celery_app().control.inspect(timeout=timeout)
        active = inspector.active() or {}
    except Exception:  # a broker without broadcast support, or one that is down
        return None
    return [
        WorkerStatus(name, [f"{t['name']}{tuple(t.get('args', ()))}" for t in tasks])
        for name, tasks in sorted(active.items())
    ]


def queue_consumers(queue: str, timeout: float = 1.0) -> list[str] | None:
    """Workers answering that consume `queue`; None when the workers cannot be asked."""
    try:
        replies = celery_app().control.inspect(timeout=timeout).active_queues()
    except Exception:  # a broker without broadcast support, or one that is down
        return None
    return sorted(name for name, queues in (replies or {}).items() if any(q.get("name") == queue for q in queues or ()))


def queues_waiting(names: tuple[str, ...] | None = None) -> dict[str, int] | None:
    """Messages waiting per queue on any broker Celery's virtual transports serve (Redis, the embedded filesystem
    one); None when the broker does not answer."""
    names = queues_all() if names is None else names
    try:
        with celery_app().connection_for_read() as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            return {name: channel.queue_declare(queue=name, passive=False).message_count for name in names}
    except Exception:  # the broker is down or refuses: nobody can tell what waits
        return None


# Reading a queue whole is cheap while the feeder bounds it; past this many messages nobody is told anything.
QUEUE_READ_MAX = 20_000


def subjects_queued(tasks: frozenset[str], names: tuple[str, ...] | None = None) -> frozenset[int] | None:
    """The first arguments (row ids) of the messages of `tasks` that wait in a queue, read from the messages
    themselves; None when the broker cannot be read so (not Redis, down, or a queue longer than QUEUE_READ_MAX)."""
    url = _redis_url()
    if not url:
        return None
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    ids: set[int] = set()
    try:
        for name in queues_all() if names is None else names:
            if client.llen(name) > QUEUE_READ_MAX:
                return None
            for raw in client.lrange(name, 0, -1):
                headers = json.loads(raw).get("headers", {})
                if headers.get("task") in tasks:
                    args = ast.literal_eval(headers.get("argsrepr") or "()")
                    if args:
                        ids.add(int(args[0]))
    except (redis.RedisError, ValueError, SyntaxError):
        return None
    return frozenset(ids)


def tasks_held(timeout: float = 1.0) -> dict[str, frozenset[int]] | None:
    """Task name -> the first arguments (row ids) of its tasks some worker holds (running, prefetched, or waiting
    for a retry's countdown); None when the workers cannot be asked."""
    held: dict[str, set[int]] = {}
    try:
        inspector = celery_app().control.inspect(timeout=timeout)
        # Asked in the order a task moves through them (each question waits out its replies, a second): a task that
        # moves on between two questions is seen in the later one, where the other order saw it in neither.
        replies = [inspector.scheduled(), inspector.reserved(), inspector.active()]
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
                if not args or not isinstance(args, (list, tuple)) or not task.get("name"):
                    continue
                try:
                    held.setdefault(task["name"], set()).add(int(args[0]))
                except (TypeError, ValueError):
                    continue  # a task whose first argument is no row id
    return {name: frozenset(ids) for name, ids in held.items()}
