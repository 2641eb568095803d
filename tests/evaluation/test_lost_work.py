"""Lost work found from what the broker and the workers report, with the default settings: after a broker restart
(nothing kept on disk) or a killed worker, a run's missing items are fed again within seconds, not after
RUN_REDISPATCH_SECONDS (300 s) of idleness."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from operations.events import Kind, events_of
from tests.conftest import demo_papers, polled

# Their tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
DEFAULTS = {"SANDBOX_BACKEND": "local"}  # nothing else set: the watchdog's defaults decide
# Well under RUN_REDISPATCH_SECONDS: a run that completes in this time was found lost from the broker's report.
RECOVERY = 120
# The demo's 11-item paper with the fastest preparation: the first 3 outcomes leave 8 items to lose, as the whole
# demo did (one slot, fed a share of RUN_ITEMS_IN_FLIGHT at a time), and 22 items more only added time.
PAPER = "topk-attention-pool"


def _completed_once(run: EvaluationRun, *, redispatched: bool = True) -> None:
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == outcomes.values("snippet", "sample").distinct().count() == run.total_items
    if redispatched:
        assert events_of(subject=run, kinds=[Kind.ITEMS_REDISPATCHED]).exists()


def test_a_broker_restart_is_recovered_from_within_seconds(own_redis, celery_worker_factory, media_root, tmp_path):
    assert settings.RUN_REDISPATCH_SECONDS >= 300 > RECOVERY
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="lost-1.0.0", publish=True).version
    worker = celery_worker_factory(queues="default,sandbox", **DEFAULTS)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    polled(lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=worker)
    own_redis.kill()
    assert Outcome.objects.filter(run=run).count() < run.total_items
    time.sleep(2)
    own_redis.start()  # empty: what was queued or unacknowledged is gone
    restarted = time.monotonic()
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=RECOVERY,
        what="the run to complete after the broker restart",
        worker=worker,
    )
    print(f"broker restart: completed {time.monotonic() - restarted:.0f} s after the broker was back")
    _completed_once(run)


def test_a_killed_worker_is_recovered_from_within_seconds(celery_worker_factory, media_root, tmp_path):
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="killed-1.0.0", publish=True).version
    first = celery_worker_factory(queues="default,sandbox", **DEFAULTS)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    polled(lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=first)
    first.kill(9)  # with its prefetched and running messages unacknowledged (hidden for the visibility timeout)
    assert Outcome.objects.filter(run=run).count() < run.total_items
    second = celery_worker_factory(queues="default,sandbox", **DEFAULTS)
    killed = time.monotonic()
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=RECOVERY,
        what="the run to complete after its worker was killed",
        worker=second,
    )
    print(f"killed worker: completed {time.monotonic() - killed:.0f} s after the kill")
    # Fed one slot at a time, the killed worker may hold no item at the kill: nothing to re-dispatch then.
    _completed_once(run, redispatched=False)


def test_the_watchdog_says_a_database_outage_once_when_it_begins_and_once_when_it_ends(own_postgres, caplog):
    import logging

    from django.db import connections

    from operations.watchdog import Watchdog
    from tests.outages import default_database

    with default_database(own_postgres.url()):
        watchdog = Watchdog(worker="w1@host")
        watchdog.look(feeding=True, for_lost_work=True)
        connections.close_all()
        own_postgres.stop("immediate")
        with caplog.at_level(logging.WARNING, logger="operations.watchdog"):
            for _ in range(3):
                watchdog.look(feeding=True, for_lost_work=True)
                connections.close_all()
            own_postgres.start()
            watchdog.look(feeding=True, for_lost_work=True)
            connections.close_all()
    lines = [r for r in caplog.records if r.name == "operations.watchdog"]
    assert [r.getMessage().split(" (")[0] for r in lines] == [
        "the watchdog cannot reach the database",
        lines[1].getMessage(),
    ], [r.getMessage() for r in lines]
    assert "reaches the database again" in lines[1].getMessage()
    assert not any(r.exc_info for r in lines), "no traceback per pass"
