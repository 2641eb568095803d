"""A large upload leaves the web request quickly: stored in bulk with a bounded number of queries, its items queued
by a background task that a real worker takes (the default queue; never the llm queue), then scored."""

from __future__ import annotations

import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from benchmarks.selectors import version_snippets
from benchmarks.services.psets import pset_import
from evaluation import services, taskfiles
from evaluation.models import EvaluationRun, Generation, Outcome, RunScore
from tests.conftest import DEMO_PSET, demo_papers, sandbox_backend_or_missing


def _answers(version, samples: int) -> bytes:
    return "".join(
        json.dumps({"id": str(s.pk), "sample": k, "answer": f"```python\n{s.reference_code}```"}) + "\n"
        for k in range(samples)
        for s in version_snippets(version=version)
    ).encode()


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _post(client, version, content: bytes):
    return client.post(
        "/api/v1/runs/upload/",
        {"file": SimpleUploadedFile("a.jsonl", content), "model": "uploader", "release": version.name},
        format="multipart",
    )


@pytest.fixture
def uploader(author):
    return services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)


@pytest.mark.django_db
def test_storing_takes_the_same_queries_for_1_or_5_samples(
    media_root, author, uploader, django_capture_on_commit_callbacks
):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    counts = []
    for samples in (1, 5):
        content = _answers(version, samples)
        taskfiles._task_files.cache_clear()  # both cold: each task's file list is read once per upload
        with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=False) as calls:
            response = _post(_client(author), version, content)
        assert response.status_code == 201, response.content[:500]
        assert len(calls) == 1  # one background dispatch, not one publish per item
        run = EvaluationRun.objects.get(pk=response.json()["id"])
        assert run.status == EvaluationRun.Status.QUEUED
        assert Generation.objects.filter(run=run).count() == run.total_items == 33 * samples
        inserts = [q for q in queries.captured_queries if q["sql"].startswith('INSERT INTO "evaluation_generation"')]
        assert len(inserts) <= 1 + run.total_items // 50  # bulk: SQLite caps a statement at 999 parameters
        counts.append(len(queries) - len(inserts))
    # everything else is per upload, not per line (nor per snippet: the protocol once, each task once)
    assert counts[0] == counts[1], counts


@pytest.mark.django_db
def test_the_answer_says_how_to_follow_the_run(media_root, author, uploader, django_capture_on_commit_callbacks):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    with django_capture_on_commit_callbacks(execute=False):
        response = _post(_client(author), version, _answers(version, 1))
    body = response.json()
    assert body["follow"] == {
        "status": f"http://testserver/api/v1/runs/{body['id']}/",
        "page": f"http://testserver/runs/{body['id']}/",
        "results": f"http://testserver/api/v1/runs/{body['id']}/results/",
    }
    assert response["Location"] == body["follow"]["status"]
    assert _client(author).get(body["follow"]["status"]).json()["status"] == "queued"


def test_the_dispatch_task_is_routed_to_the_default_queue(settings):
    from config.celery import app

    routed = app.amqp.router.route({}, "evaluation.tasks.run_dispatch")
    assert routed["queue"].name == "default"
    assert app.amqp.router.route({}, "evaluation.tasks.item_evaluate")["queue"].name == "sandbox"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_upload_is_queued_in_the_background_and_scored_without_the_llm_queue(
    media_root, author, uploader, celery_worker_factory, sandbox_cache, tmp_path
):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    # The demo's 11-item paper with the fastest preparation: the queues taking part, not the number of items, are
    # what is tested.
    version = pset_import(root=demo_papers(tmp_path, "topk-attention-pool"), version_name="1.0.0", publish=True).version
    worker = celery_worker_factory(queues="default,sandbox", SANDBOX_BACKEND="bwrap")  # no llm consumer at all
    response = _post(_client(author), version, _answers(version, 2))
    assert response.status_code == 201, response.content[:500]
    run_id = response.json()["id"]
    deadline = time.monotonic() + 600
    while EvaluationRun.objects.get(pk=run_id).status != EvaluationRun.Status.COMPLETED:
        assert time.monotonic() < deadline, worker.output()[-6000:]
        time.sleep(0.5)
    outcomes = Outcome.objects.filter(run_id=run_id)
    assert outcomes.count() == 22 and outcomes.values("snippet", "sample").distinct().count() == 22
    assert set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert RunScore.objects.get(run_id=run_id, paper=None, split="").scaled_pass_rate == 100.0


@pytest.mark.django_db
def test_the_run_page_and_the_results_api_paginate(media_root, author, uploader, django_capture_on_commit_callbacks):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    with django_capture_on_commit_callbacks(execute=False):
        run = EvaluationRun.objects.get(pk=_post(_client(author), version, _answers(version, 5)).json()["id"])
    Outcome.objects.bulk_create(
        [
            Outcome(run=run, snippet_id=g.snippet_id, sample=g.sample, generation=g, status=Outcome.Status.PASSED)
            for g in Generation.objects.filter(run=run)
        ]
    )
    client = _client(author)
    first = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Items 1–100 of 165" in first and first.count('<details class="item"') == 100
    last = client.get(f"/runs/{run.pk}/", {"page": 2}).content.decode()
    assert "Items 101–165 of 165" in last and last.count('<details class="item"') == 65
    assert client.get(f"/runs/{run.pk}/", {"page": "junk"}).status_code == 200  # a bad page number: the first

    seen = []
    url = f"/api/v1/runs/{run.pk}/results/"
    with CaptureQueriesContext(connection) as queries:
        while url:
            body = client.get(url).json()
            seen += [(r["item"], r["sample"]) for r in body["results"]]
            url = body["next"]
    assert len(seen) == len(set(seen)) == 165 and seen == sorted(seen)  # every item once, in item order
    assert len(queries) <= 4 * 7  # four pages of 50, a few queries each (one: the tasks it may show tracebacks of)
