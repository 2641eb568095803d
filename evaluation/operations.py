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

QUEUES = ("llm", "sandbox", "default")


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


def runs_stalled(*, seconds: int | None = None) -> QuerySet[EvaluationRun]:
    """Running runs with no new result for longer than RUN_STALL_SECONDS."""
    limit = timezone.now() - timedelta(seconds=seconds if seconds is not None else settings.RUN_STALL_SECONDS)
    return (EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, last_progress_at__lt=limit)
            .select_related("model", "version").order_by("last_progress_at"))
