"""The operations page: queues with length and age, stalled runs resumed; and two workers sharing one run."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.outcomes import Verdict
from operations.broker import queues_status
from tests.conftest import sandbox_backend_or_missing


@pytest.mark.django_db
def test_operations_page_is_for_maintainers(client, author, maintainer):
    assert client.get("/operations/").status_code == 302
    client.force_login(author)
    assert client.get("/operations/").status_code == 403
    client.force_login(maintainer)
    assert client.get("/operations/").status_code == 200


@pytest.mark.django_db
def test_a_stalled_run_is_flagged_and_resuming_queues_only_its_missing_items(client, maintainer, release, fresh_broker):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    snippets = list(release.tasks.first().snippets.all())
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in snippets:
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""))
    EvaluationRun.objects.filter(pk=run.pk).update(last_progress_at=timezone.now() - timedelta(hours=1))
    client.force_login(maintainer)

    page = client.get("/operations/").content.decode()
    assert f'data-stalled-run="{run.pk}"' in page

    client.post(f"/operations/runs/{run.pk}/resume/")
    time.sleep(0.5)
    sandbox = next(q for q in queues_status() if q.name == "sandbox")
    # Only missing items, and only the run's share of them: the feeder queues the rest as these end.
    assert sandbox.length == min(run.total_items - len(snippets), settings.RUN_ITEMS_IN_FLIGHT)
    assert sandbox.oldest_seconds is not None and 0 <= sandbox.oldest_seconds < 60


@pytest.mark.django_db
def test_an_upload_cancelled_and_resumed_before_its_dispatch_ran_gets_its_start_time(release, fresh_broker):
    """The upload's dispatch is a task (here never run, as when the broker refused it): the run is still queued when
    its owner cancels and resumes it, so it never leaves QUEUED through the dispatch that stamps the start."""
    import json

    from benchmarks.selectors import version_snippets

    uploader = ModelEntry.objects.create(name="bulk", display_name="Bulk", kind=ModelEntry.Kind.UPLOADED)
    data = "".join(
        json.dumps({"id": str(s.pk), "sample": 0, "code": s.reference_code}) + "\n"
        for s in version_snippets(version=release)
    ).encode()
    run = services.run_from_upload(model=uploader, version=release, data=data)
    assert run.status == EvaluationRun.Status.QUEUED and run.started_at is None
    services.run_cancel(run=run)
    assert services.run_resume(run=run) > 0
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.RUNNING and run.started_at is not None


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_workers_with_their_own_caches_split_one_run(release, celery_worker_factory, sandbox_cache, tmp_path):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    first = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SANDBOX_CACHE_DIR=str(tmp_path / "a"))
    second = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SANDBOX_CACHE_DIR=str(tmp_path / "b"))
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, samples=3)
    deadline = time.monotonic() + 600
    while EvaluationRun.objects.get(pk=run.pk).status != EvaluationRun.Status.COMPLETED:
        assert time.monotonic() < deadline, first.output()[-3000:] + second.output()[-3000:]
        time.sleep(0.5)
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == outcomes.values("snippet", "sample").distinct().count() == 99
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert len(set(outcomes.values_list("worker", flat=True))) == 2, "both workers took part"
    for cache in ("a", "b"):
        assert any((tmp_path / cache / "blobs").rglob("*")), f"worker {cache} fetched task files into its own cache"
