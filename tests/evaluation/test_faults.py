"""Faults in the middle of a run, with real processes: the broker (a Redis of the test's own, keeping nothing on disk)
killed and started again, the database (a PostgreSQL cluster of the test's own) stopped and started again. No item
is lost or counted twice, the run completes by itself, and the operations page says what happened."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from django.utils import timezone

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from operations.events import events_of
from operations.models import OperationsEvent
from tests.conftest import demo_papers, polled
from tests.outages import WATCH, default_database

# Their tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
# The demo's 11-item paper with the fastest preparation: after the first 3 outcomes the rest of the run's first
# share (RUN_ITEMS_IN_FLIGHT, 8) is still queued or running when the fault hits, as with the whole demo, whose 22
# items more only added time.
PAPER, ITEMS = "topk-attention-pool", 11


def assert_every_item_once_and_scored(run: EvaluationRun, items: int = ITEMS) -> None:
    run.refresh_from_db()
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == outcomes.values("snippet", "sample").distinct().count() == run.total_items == items
    assert run.done_items == items, "the progress counter counts every outcome once"
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert RunScore.objects.get(run=run, paper=None, split="").scaled_pass_rate == 100.0


def operations_page(client, maintainer) -> str:
    client.force_login(maintainer)
    response = client.get("/operations/")
    assert response.status_code == 200
    return response.content.decode()


def test_broker_killed_mid_run_loses_no_item_and_the_run_completes_by_itself(
    own_redis, celery_worker_factory, media_root, client, maintainer, tmp_path
):
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="faults-1.0.0", publish=True).version
    worker = celery_worker_factory(queues="default,sandbox", **WATCH)
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    polled(lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=worker)

    own_redis.kill()
    lost_at = Outcome.objects.filter(run=run).count()
    assert lost_at < run.total_items, "the broker must die mid-run for this test to mean anything"
    time.sleep(3)
    own_redis.start()  # empty: every queued and unacknowledged message is gone
    back = timezone.now()

    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=300,
        what="the run to complete by itself",
        worker=worker,
    )
    assert_every_item_once_and_scored(run)
    redispatched = events_of(subject=run).get(kind=OperationsEvent.Kind.ITEMS_REDISPATCHED)
    assert 0 < redispatched.items <= run.total_items - lost_at
    # The worker reconnects within seconds and the watchdog re-dispatches RUN_LOST_SECONDS (here 4 s) after the last
    # progress, looking every RUN_WATCH_SECONDS (2 s): well within half a minute of the broker's return.
    recovery = (redispatched.created_at - back).total_seconds()
    assert recovery < 30, f"re-dispatched {recovery:.0f} s after the broker was back"
    assert OperationsEvent.objects.filter(kind=OperationsEvent.Kind.BROKER_UNAVAILABLE).exists()

    page = operations_page(client, maintainer)
    assert f'data-event="{redispatched.pk}"' in page and "re-dispatched" in page
    assert "broker" in page.lower()


def test_database_stopped_mid_run_loses_no_item_and_the_run_and_its_evaluate_command_complete_by_themselves(
    own_postgres, celery_worker_factory, worker_broker, media_root, sandbox_cache, client, tmp_path
):
    import os
    import subprocess
    import sys

    from django.contrib.auth.models import Group, User

    from tests.conftest import REPO, database_url_for_workers

    with default_database(own_postgres.url()):
        version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="faults-db-1.0.0", publish=True).version
        worker = celery_worker_factory(queues="default,sandbox", **WATCH)
        # Started and followed by `manage.py evaluate`, which reads the run's progress through the outage.
        command_log = (tmp_path / "evaluate.log").open("w+")
        command = subprocess.Popen(
            [sys.executable, "manage.py", "evaluate", "--model", "reference", "--version", version.name],
            cwd=REPO,
            env={
                **os.environ,
                "DATABASE_URL": database_url_for_workers(),
                "CELERY_BROKER_URL": worker_broker,
                "MEDIA_ROOT": str(media_root),
                "SANDBOX_CACHE_DIR": str(sandbox_cache),
                **WATCH,
            },
            stdout=command_log,
            stderr=subprocess.STDOUT,
        )
        run = polled(lambda: EvaluationRun.objects.filter(version=version).first(), timeout=120, what="the run")
        polled(
            lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=worker
        )

        done_before = Outcome.objects.filter(run=run).count()
        connection.close()
        own_postgres.stop("immediate")  # every session ends at once, as in a crash
        time.sleep(5)
        own_postgres.start()
        assert done_before < run.total_items, "the database must go down mid-run for this test to mean anything"

        polled(
            lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=300,
            what="the run to complete by itself",
            worker=worker,
        )
        assert_every_item_once_and_scored(run)
        assert command.wait(timeout=120) == 0, command_log.seek(0) or command_log.read()[-4000:]
        command_log.seek(0)
        said = command_log.read()
        assert "the database does not answer" in said and "Traceback" not in said, said[-4000:]
        assert "ALL" in said and "100.0%" in said, "the summary once the database is back"
        outage = OperationsEvent.objects.filter(kind=OperationsEvent.Kind.DATABASE_UNAVAILABLE).first()
        assert outage is not None, worker.output()[-4000:]
        assert outage.worker and outage.since is not None

        maintainer = User.objects.create_user("maya", password="pw-maya-12345")
        maintainer.groups.add(Group.objects.get_or_create(name="maintainers")[0])
        page = operations_page(client, maintainer)
        assert f'data-event="{outage.pk}"' in page and "Database unavailable" in page
        worker.kill()


def _item_message(path) -> bool:
    try:
        return json.loads(path.read_text()).get("headers", {}).get("task") == "evaluation.tasks.item_evaluate"
    except FileNotFoundError:  # taken by the worker meanwhile
        return False


def test_embedded_broker_losing_its_queue_mid_run_the_run_completes_by_itself(media_root, sandbox_cache, tmp_path):
    """The embedded default (kombu's filesystem broker, no Redis): its queue folder emptied mid-run. One paper of
    the demo (10 items): after the first 3 outcomes, the rest of the run's first share (RUN_ITEMS_IN_FLIGHT, 8) still
    waits in the folder, and 23 items more only added time."""
    from tests.conftest import embedded_worker

    with embedded_worker(
        tmp_path,
        queues="default,sandbox",
        env={"MEDIA_ROOT": str(media_root), "SANDBOX_CACHE_DIR": str(sandbox_cache), **WATCH},
    ) as (worker, queue):
        version = pset_import(
            root=demo_papers(tmp_path, "trimmed-infonce"), version_name="faults-fs-1.0.0", publish=True
        ).version
        run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
        polled(
            lambda: Outcome.objects.filter(run=run).count() >= 3, timeout=300, what="the first outcomes", worker=worker
        )
        # The run's items only: the folder also holds the workers' control messages (the watchdog's inspect
        # broadcasts), which are no lost work.
        lost = [message.unlink() for message in queue.glob("*.msg") if _item_message(message)]
        assert lost, "messages must be waiting for this test to mean anything"

        polled(
            lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=300,
            what="the run to complete by itself",
            worker=worker,
        )
        assert_every_item_once_and_scored(run, items=10)
        # The watchdog re-dispatches what the run's share of the free slots allows (run_dispatch), and the feeder
        # queues the rest as items finish: at least one re-dispatched, every lost item run once (above).
        redispatched = events_of(subject=run).filter(kind=OperationsEvent.Kind.ITEMS_REDISPATCHED)
        assert sum(event.items for event in redispatched) >= 1


def test_a_run_started_while_the_broker_is_down_is_dispatched_once_it_is_back(
    own_redis, celery_worker_factory, media_root, tmp_path
):
    version = pset_import(root=demo_papers(tmp_path, PAPER), version_name="faults-start-1.0.0", publish=True).version
    own_redis.kill()
    started = time.monotonic()
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=version)
    assert time.monotonic() - started < 30, "a refused dispatch fails fast instead of hanging the request"
    refused = events_of(subject=run).get(kind=OperationsEvent.Kind.BROKER_UNAVAILABLE)
    assert "0 of 8 item(s) queued" in refused.detail, "of the run's first share (RUN_ITEMS_IN_FLIGHT)"

    own_redis.start()
    worker = celery_worker_factory(queues="default,sandbox", **WATCH)
    polled(
        lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
        timeout=300,
        what="the run to complete by itself",
        worker=worker,
    )
    assert_every_item_once_and_scored(run)
    # Fed again from its first item: what the worker's one slot runs now, the rest as those end.
    assert events_of(subject=run).get(kind=OperationsEvent.Kind.ITEMS_REDISPATCHED).items == 1
