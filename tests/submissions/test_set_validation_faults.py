"""Faults while a draft version's papers validate on the workers, with real processes: the broker (a Redis of the
test's own, keeping nothing on disk) killed while papers wait in its queue, and a paper whose stored file is gone.
A lost paper is queued again by the watchdog, as a submission's validation is; one lost past
VALIDATION_REDISPATCH_MAX, or one the platform fails on, ends as an error, so the page shows what happened and
offers to validate again instead of waiting for ever."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from benchmarks.models import Blob
from benchmarks.services.psets import pset_import
from operations.events import events_of
from operations.models import OperationsEvent
from submissions import validation
from submissions.models import SetValidation, SetValidationPaper
from tests.conftest import DEMO_PSET, demo_papers, polled
from tests.outages import WATCH

# Their tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
WORKER = {**WATCH, "SUBMISSION_REFERENCE_RUNS": "2", "SUBMISSION_MUTANTS": "0"}  # mutants: their own tests
Kind = OperationsEvent.Kind


def two_papers(tmp_path: Path) -> Path:
    """The demo set without its paper topk-attention-pool: the first paper dispatched (dampnest, the most snippets)
    and the one with the fewest (trimmed-infonce, no requirements to install). Enough for one paper under way and
    one waiting (or going on); a third paper's validation only added time, the papers' own checks being other tests'
    subject."""
    return demo_papers(tmp_path, "dampnest", "trimmed-infonce")


def started(name: str, maintainer, root: Path = DEMO_PSET) -> SetValidation:
    version = pset_import(root=root, version_name=name).version
    return validation.version_validation_start(version=version, actor=maintainer)


def finished(run: SetValidation) -> bool:
    return not SetValidation.objects.get(pk=run.pk).is_active


def broker_killed_while_papers_wait(own_redis, run: SetValidation, worker) -> SetValidationPaper:
    """Kill the broker once the first paper is under way (one worker process: the others wait in the queue)."""
    polled(
        lambda: SetValidationPaper.objects.filter(validation=run, status="running").exclude(checks=[]).first(),
        timeout=600,
        what="the first paper to be under way",
        worker=worker,
    )
    under_way = SetValidationPaper.objects.get(validation=run, status="running")
    assert run.papers.filter(status="pending").exists(), "papers must wait in the queue for this test to mean anything"
    own_redis.kill()  # the waiting papers' messages are gone with it
    time.sleep(3)
    own_redis.start()
    return under_way


def version_page(client, maintainer, run: SetValidation) -> str:
    client.force_login(maintainer)
    response = client.get(reverse("version-detail", args=[run.version.name]))
    assert response.status_code == 200
    return response.content.decode()


def test_broker_killed_while_papers_wait_every_paper_is_validated_once(
    own_redis, celery_worker_factory, media_root, client, maintainer, tmp_path
):
    worker = celery_worker_factory(queues="sandbox", **WORKER)
    run = started("set-faults-1.0.0", maintainer, two_papers(tmp_path))
    assert run.papers.count() == 2
    under_way = broker_killed_while_papers_wait(own_redis, run, worker)

    polled(lambda: finished(run), timeout=900, what="the set validation to finish by itself", worker=worker)
    run.refresh_from_db()
    assert run.status == "passed", [(p.paper, p.status, p.checks[-1:]) for p in run.papers.all()]
    for paper in run.papers.all():
        keys = [c["key"] for c in paper.checks]
        assert len(keys) == len(set(keys)) == paper.checks_total, f"{paper.paper}: every check once"
    events = events_of(subject=run, kinds=[Kind.VALIDATION_REDISPATCHED])
    lost = run.papers.filter(redispatches__gt=0)
    assert lost.exists() and events.count() == sum(p.redispatches for p in lost)
    assert under_way.pk not in {p.pk for p in lost}, "a paper a worker is running is left alone"
    assert not OperationsEvent.objects.filter(kind=Kind.VALIDATION_ABANDONED).exists()

    page = version_page(client, maintainer, run)
    assert "lost and queued again 1 time" in page and "Validate every paper" in page
    operations = client.get("/operations/").content.decode()
    event = events.first()
    assert f'data-event="{event.pk}"' in operations and "Validation re-dispatched" in operations
    assert reverse("version-detail", args=[run.version.name]) in operations


def test_a_paper_lost_past_the_limit_ends_as_an_error_and_the_version_can_be_validated_again(
    own_redis, celery_worker_factory, media_root, client, maintainer
):
    worker = celery_worker_factory(queues="sandbox", VALIDATION_REDISPATCH_MAX="0", **WORKER)
    run = started("set-faults-2.0.0", maintainer)
    broker_killed_while_papers_wait(own_redis, run, worker)

    polled(lambda: finished(run), timeout=900, what="the set validation to end by itself", worker=worker)
    run.refresh_from_db()
    assert run.status == "error"
    given_up = run.papers.filter(status="error")
    assert given_up.exists() and not run.papers.filter(redispatches__gt=0).exists(), "never queued again"
    assert {(e.subject_kind, e.subject_id) for e in OperationsEvent.objects.filter(kind=Kind.VALIDATION_ABANDONED)} == {
        ("submissions.setvalidation", run.pk)
    }
    assert OperationsEvent.objects.filter(kind=Kind.VALIDATION_ABANDONED).count() == given_up.count()

    page = version_page(client, maintainer, run)
    assert "the workers lost this paper&#x27;s task once" in page
    assert "Validate every paper" in page and 'hx-trigger="every 2s"' not in page
    again = client.post(reverse("version-validate", args=[run.version.name]), follow=True).content.decode()
    assert f"Validating 3 paper(s) of {run.version.name} on the workers." in again
    assert SetValidation.objects.filter(version=run.version).count() == 2


def test_a_paper_the_platform_fails_on_ends_as_an_error_at_once(
    celery_worker_factory, media_root, client, maintainer, tmp_path
):
    version = pset_import(root=two_papers(tmp_path), version_name="set-faults-3.0.0").version
    task = version.tasks.get(paper__slug="dampnest")
    default_storage.delete(Blob(sha256=task.files[task.paper_path], size=0).storage_name)  # storage lost a file
    worker = celery_worker_factory(queues="sandbox", **WORKER)
    run = validation.version_validation_start(version=version, actor=maintainer)

    broken = run.papers.get(paper="dampnest")
    polled(
        lambda: SetValidationPaper.objects.get(pk=broken.pk).status == "error",
        timeout=300,
        what="the paper with a lost file to end",
        worker=worker,
    )
    broken.refresh_from_db()
    assert "the platform failed on this paper: FileNotFoundError" in broken.checks[0]["detail"]
    polled(lambda: finished(run), timeout=900, what="the other papers", worker=worker)
    page = version_page(client, maintainer, SetValidation.objects.get(pk=run.pk))
    assert "the platform failed on this paper" in page and "Validate every paper" in page
