"""A fresh `make run` flooded the worker's log with "run N: a message of its feed 1 dropped (the run is on feed 2)":
the publish feeds the release's calibration runs (feed 1) and `demo_populate --background` feeds them again (feed 2),
so every message of the first feed reaches the worker stale. Nothing is lost by it (the current feed queues each item
again): the drop is said at debug level only."""

from __future__ import annotations

import base64
import json
import logging

import pytest
import redis
from django.core.management import call_command

from evaluation import tasks
from evaluation.models import EvaluationRun, Outcome
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def queued_items(broker: str) -> list[list]:
    """The item messages waiting on the broker's sandbox queue, as their task arguments: run, snippet, sample, feed."""
    bodies = [json.loads(m)["body"] for m in redis.Redis.from_url(broker).lrange("sandbox", 0, -1)]
    return [json.loads(base64.b64decode(body))[0] for body in bodies]


def test_a_fresh_demo_start_drops_its_first_feed_quietly(fresh_broker, worker_broker, media_root, settings, caplog):
    settings.RELEASE_CALIBRATE_ON_PUBLISH = True  # as `make run` has it (the suite turns it off)
    call_command("import_pset", str(DEMO_PSET), version="demo-1.0.0", publish=True)
    call_command("demo_populate", version="demo-1.0.0", background=True)

    runs = dict(EvaluationRun.objects.values_list("pk", "feed_epoch"))
    items = queued_items(worker_broker)
    stale = [args for args in items if args[3] != runs[args[0]]]
    assert stale, f"a fresh start feeds its calibration runs twice: {sorted(runs.items())}, {len(items)} messages"

    with caplog.at_level(logging.DEBUG):
        for args in stale:
            tasks.item_evaluate.apply(args=args, throw=True)

    assert not Outcome.objects.exists(), "a stale message runs nothing"
    # The platform's own records (Celery says each task's end at info, as for every task).
    ours = [r for r in caplog.records if not r.name.startswith("celery")]
    loud = [f"{r.levelname} {r.getMessage()}" for r in ours if r.levelno >= logging.INFO]
    assert not loud, loud
    said = [r.getMessage() for r in caplog.records if r.name == "evaluation.pipeline"]
    assert len(said) == len(stale) and all("dropped (the run is on feed" in line for line in said), said
