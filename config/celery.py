"""The Celery application; configuration comes from Django settings prefixed CELERY_."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()



@app.task(name="config.ping")
def ping() -> str:
    """Round trip through broker and worker, used by health checks and tests."""
    return "pong"
