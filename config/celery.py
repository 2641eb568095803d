"""The Celery application; configuration comes from Django settings prefixed CELERY_."""

import os
import time

from celery import Celery
from celery.signals import before_task_publish

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
