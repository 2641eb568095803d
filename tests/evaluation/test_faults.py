"""Faults in the middle of a run, with real processes: the broker (a Redis of the test's own, keeping nothing on disk)
killed and started again, the database (a PostgreSQL cluster of the test's own) stopped and started again. No item
is lost or counted twice, the run completes by itself, and the operations page says what happened."""

from __future__ import annotations

import time

import pytest
from django.db import DatabaseError, connection

from benchmarks.services import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, OperationsEvent, Outcome, RunScore
from tests.conftest import DEMO_PSET
from tests.outages import PostgresCluster, RedisServer, default_database

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

# Workers look for lost work every 2 s and re-dispatch what has no outcome and no live task after 6 s.
WATCH = {"RUN_WATCH_SECONDS": "2", "RUN_REDISPATCH_SECONDS": "6", "SANDBOX_BACKEND": "local"}


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def worker_broker(own_redis):
    """Overrides the shared-Redis broker of conftest: these tests kill their broker."""
    return own_redis.url


def polled(query, *, timeout: float, what: str, worker=None):
    """Poll `query()` until it returns something truthy; the database may be down for a while meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = query()
        except DatabaseError:
            connection.close()
            value = None
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{worker.output()[-6000:] if worker else ''}")


def assert_every_item_once_and_scored(run: EvaluationRun) -> None:
    run.refresh_from_db()
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == outcomes.values("snippet", "sample").distinct().count() == run.total_items == 33
    assert run.done_items == 33, "the progress counter counts every outcome once"
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert RunScore.objects.get(run=run, paper=None, split="").scaled_pass_rate == 100.0


def operations_page(client, maintainer) -> str:
    client.force_login(maintainer)
    response = client.get("/operations/")
    assert response.status_code == 200
    return response.content.decode()


def test_broker_killed_mid_run_loses_no_item_and_the_run_completes_by_itself(
        own_redis, celery_worker_factory, media_root, client, maintainer):
    version = pset_import(root=DEMO_PSET, version_name="faults-1.0.0", publish=True).version
    worker = celery_worker_factory(queues="default,sandbox", **WATCH)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    polled(lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=worker)

    own_redis.kill()
    lost_at = Outcome.objects.filter(run=run).count()
    assert lost_at < run.total_items, "the broker must die mid-run for this test to mean anything"
    time.sleep(3)
    own_redis.start()  # empty: every queued and unacknowledged message is gone

    polled(lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED, timeout=300,
           what="the run to complete by itself", worker=worker)
    assert_every_item_once_and_scored(run)
    redispatched = OperationsEvent.objects.get(kind=OperationsEvent.Kind.ITEMS_REDISPATCHED, run=run)
    assert 0 < redispatched.items <= run.total_items - lost_at
    assert OperationsEvent.objects.filter(kind=OperationsEvent.Kind.BROKER_UNAVAILABLE).exists()

    page = operations_page(client, maintainer)
    assert f'data-event="{redispatched.pk}"' in page and "re-dispatched" in page
    assert "broker" in page.lower()
