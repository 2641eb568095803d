"""The Celery application; configuration comes from Django settings prefixed CELERY_."""

import os
import time

from celery import Celery, bootsteps
from celery.signals import before_task_publish, task_postrun, task_prerun, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="config.ping")
def ping() -> str:
    """Round trip through broker and worker, used by health checks and tests."""
    return "pong"


@before_task_publish.connect
def _stamp_enqueued_at(headers: dict | None = None, **kwargs: object) -> None:
    """When the message was queued, so the operations page can tell the age of a queue's oldest task."""
    if headers is not None:
        headers.setdefault("enqueued_at", time.time())


def _eager(task) -> bool:
    """Run in a caller's process (and maybe in its transaction): its connections are the caller's, as Celery's own
    closing leaves them."""
    return bool(getattr(getattr(task, "request", None), "is_eager", False))


@task_prerun.connect
def _connections_checked(task=None, **kwargs: object) -> None:
    """A kept database connection (CELERY_DB_REUSE_MAX) is checked before each task as Django checks one per request:
    closed when past CONN_MAX_AGE or broken by an error, pinged before its first use (CONN_HEALTH_CHECKS)."""
    from django.db import close_old_connections

    if not _eager(task):
        close_old_connections()


@task_postrun.connect
def _connections_left_clean(task=None, **kwargs: object) -> None:
    """A kept connection a task left inside a transaction (a raw BEGIN, which Django does not see) is closed: the next
    task would otherwise run inside it, and its work be lost with the connection."""
    from django.db import connections

    if _eager(task):
        return
    for connection in connections.all(initialized_only=True):
        if connection.vendor == "postgresql" and connection.connection is not None:
            from psycopg.pq import TransactionStatus

            if connection.connection.info.transaction_status != TransactionStatus.IDLE:
                connection.close()


@worker_ready.connect
def _watchdog_start(sender=None, **kwargs: object) -> None:
    """Every worker looks for lost work (operations/watchdog.py), so no beat process is needed."""
    from operations.watchdog import watchdog_start

    controller = getattr(sender, "controller", None)
    queues = getattr(getattr(getattr(sender, "app", None), "amqp", None), "queues", None)
    watchdog_start(
        worker=getattr(sender, "hostname", "") or "",
        queues=sorted(queues.consume_from) if queues is not None else [],
        slots=int(getattr(controller, "concurrency", 0) or 0),
    )


@worker_shutdown.connect
def _watchdog_stop(**kwargs: object) -> None:
    from operations.watchdog import watchdog_stop

    watchdog_stop()


class BrokerOutage(bootsteps.StartStopStep):
    """Records on the operations page that this worker lost the broker and when it was back."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def __init__(self, parent, **kwargs: object) -> None:
        super().__init__(parent, **kwargs)
        self.lost_at: float | None = None

    def start(self, parent) -> None:
        if self.lost_at is None:
            return
        lost_at, self.lost_at = self.lost_at, None
        import datetime
        import logging

        from django.db import connections

        from operations.events import Kind, event_record

        try:
            event_record(
                kind=Kind.BROKER_UNAVAILABLE,
                worker=parent.hostname or "",
                since=datetime.datetime.fromtimestamp(lost_at, tz=datetime.UTC),
                detail=f"the worker lost its broker connection and reconnected after {time.time() - lost_at:.0f} s; "
                "tasks queued meanwhile or held unacknowledged may be lost (the watchdog queues them again)",
            )
        except Exception:  # the database may be down too; the worker log keeps it
            logging.getLogger(__name__).warning("could not record the broker outage", exc_info=True)
        finally:
            connections.close_all()

    def stop(self, parent) -> None:  # the consumer stops its steps when the connection is lost (and at shutdown)
        self.lost_at = time.time()


app.steps["consumer"].add(BrokerOutage)
