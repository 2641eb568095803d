"""Queue a task, or record that the broker refused it: the one way every app queues work a fault can lose.

What was to be done is stored before it is queued, so a refused message loses nothing: the watchdog finds the work
(no task queued or held for it) and queues it once the broker answers; the event says so on the operations page."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

from django.db import models
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from operations.events import Kind, event_record

logger = logging.getLogger(__name__)


def task_named(name: str):
    """A registered Celery task by its name: a service queues work by name, so that it never imports the tasks
    module that imports it (DESIGN.md: no import cycle inside an app)."""
    from celery import current_app

    if name not in current_app.tasks:  # its module not imported yet in this process (a worker imports them all)
        importlib.import_module(name.rsplit(".", 1)[0])
    return current_app.tasks[name]


def enqueue(task, *args, subject: models.Model | None, refused: Callable[[Exception], str]) -> bool:
    """`task.delay(*args)` (`task` a task or its name); when the broker refuses it, record a broker outage about
    `subject`, with `refused(error)` as its detail, and return False (the watchdog queues the work again once the
    broker answers)."""
    try:
        (task_named(task) if isinstance(task, str) else task).delay(*args)
    except KombuOperationalError as exc:
        detail = refused(exc)
        logger.warning("%s", detail)
        event_record(kind=Kind.BROKER_UNAVAILABLE, subject=subject, since=timezone.now(), detail=detail)
        return False
    return True
