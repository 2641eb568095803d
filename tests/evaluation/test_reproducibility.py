"""The reproducibility record of a run: a manifest with a hash over it (held-out items for maintainers only), the
environment lock a worker records, and `run_reproduce` re-executing every item against the stored verdicts."""

from __future__ import annotations

import hashlib
import json
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.models import Snippet, VersionTask
from common.canonical import canonical_hash
from evaluation import services
from evaluation.models import EnvironmentLock, EvaluationRun, ModelEntry, Outcome
from evaluation.outcomes import Verdict
from evaluation.reproducibility import MANIFEST_FORMAT, manifest_verify
from evaluation.tasks import item_evaluate
from sandbox import Limits
from tests.conftest import client_for, download_body, sandbox_backend_or_missing, service_missing

pytestmark = pytest.mark.django_db
LOCK = {"kind": "venv", "python": "3.11.2", "distributions": {"numpy": "1.26.4"}}
ITEM_FIELDS = {
    "item",
    "sample",
    "paper",
    "file",
    "snippet",
    "task_content_hash",
    "prompt_hash",
    "answer_field",
    "answer_hash",
    "code_hash",
    "environment_hash",
    "environment_lock",
    "protocol",
    "limits",
    "sandbox_backend",
    "worker",
    "verdict",
    "forked",
}


api = client_for


def manifest_get(client, path: str) -> dict:
    """A manifest as its reader gets it: streamed item by item, never one body in memory."""
    return json.loads(download_body(client.get(path)))


def recorded(release) -> EvaluationRun:
    """A completed reference run whose outcomes carry a lock and limits, as a worker records them."""
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release).select_related("task"):
        generation = services.calibration_generation(run=run, snippet=snippet, sample=0)
        services.outcome_record(
            run=run,
            snippet=snippet,
            sample=0,
            verdict=Verdict("passed", "", ""),
            generation=generation,
            backend="bwrap",
            worker="w1@host",
            limits=Limits(wall_seconds=60),
            environment_lock=LOCK,
        )
    assert services.run_maybe_finish(run=run)
    run.refresh_from_db()
    return run


def test_manifest_records_every_item_and_hashes_the_whole(release, maintainer):
    run = recorded(release)
    manifest = manifest_get(api(maintainer), f"/api/v1/runs/{run.pk}/manifest/")
    assert manifest["format"] == MANIFEST_FORMAT and manifest["scope"] == "all items"
    assert manifest["run"]["release_manifest_hash"] == release.manifest_hash
    assert len(manifest["items"]) == run.total_items == Outcome.objects.filter(run=run).count()
    item = manifest["items"][0]
    assert set(item) == ITEM_FIELDS
    outcome = Outcome.objects.select_related("generation", "snippet__task").get(run=run, snippet_id=item["item"])
    assert item["task_content_hash"] == outcome.snippet.task.content_hash
    assert item["prompt_hash"] == outcome.generation.prompt_hash
    assert item["answer_hash"] == hashlib.sha256(outcome.generation.raw_answer.encode()).hexdigest()
    assert item["code_hash"] == hashlib.sha256(outcome.generation.extracted_code.encode()).hexdigest()
    assert item["limits"]["wall_seconds"] == 60 and item["sandbox_backend"] == "bwrap" and item["worker"] == "w1@host"
    assert item["verdict"] == {"status": "passed", "category": ""} and item["protocol"] == "rcb-v1"
    assert manifest["environments"] == {canonical_hash(LOCK): LOCK} and item["environment_lock"] == canonical_hash(LOCK)
    environments = set(release.tasks.values_list("environment_hash", flat=True))
    assert EnvironmentLock.objects.count() == len(environments), "a lock is stored once per environment"
    assert manifest_verify(manifest)
    manifest["items"][3]["verdict"]["status"] = "failed"
    assert not manifest_verify(manifest), "the hash covers every verdict"


def test_manifest_streams_its_canonical_spelling_from_run_scoped_queries(release, author, maintainer):
    """What is streamed is the body's canonical JSON as hashed, then `sha256`; the items come from one run-scoped
    query (a join for the public split), never `pk__in` over a subquery of the outcomes, which PostgreSQL planned
    quadratically on a fresh table."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evaluation.reproducibility import canonical_json

    VersionTask.objects.filter(pk=release.memberships.get(task__paper__slug="dampnest").pk).update(
        split=VersionTask.Split.HELD_OUT
    )
    run = recorded(release)
    for caller in (api(author), api(maintainer)):
        with CaptureQueriesContext(connection) as queries:
            response = caller.get(f"/api/v1/runs/{run.pk}/manifest/")
            streamed = download_body(response)
        assert response.streaming and response["Content-Type"] == "application/json"
        manifest = json.loads(streamed)
        body = {key: value for key, value in manifest.items() if key != "sha256"}
        assert streamed == (canonical_json(body)[:-1] + f',"sha256":"{manifest["sha256"]}"}}').encode()
        assert manifest_verify(manifest)
        outcome_reads = [q["sql"] for q in queries if 'FROM "evaluation_outcome"' in q["sql"]]
        assert outcome_reads and not any('"evaluation_outcome"."id" IN (SELECT' in sql for sql in outcome_reads)
        order = [(i["paper"], i["file"]) for i in manifest["items"]]
        assert order == sorted(order)


def test_page_link_downloads_the_same_manifest(client, release, maintainer):
    run = recorded(release)
    client.force_login(maintainer)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f'href="{reverse("run-manifest", args=[run.pk])}" download' in page
    response = client.get(reverse("run-manifest", args=[run.pk]))
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-manifest.json"'
    downloaded = json.loads(download_body(response))
    assert manifest_verify(downloaded)
    assert downloaded["sha256"] == manifest_get(api(maintainer), f"/api/v1/runs/{run.pk}/manifest/")["sha256"]


def test_held_out_items_appear_only_in_maintainers_manifests(client, release, author, maintainer):
    held = release.memberships.get(task__paper__slug="dampnest")
    VersionTask.objects.filter(pk=held.pk).update(split=VersionTask.Split.HELD_OUT)
    run = recorded(release)
    hidden = set(Snippet.objects.filter(task=held.task).values_list("pk", flat=True))
    hidden_answers = {
        hashlib.sha256(g.raw_answer.encode()).hexdigest() for g in run.generations.filter(snippet_id__in=hidden)
    }
    for caller in (api(), api(author)):
        manifest = manifest_get(caller, f"/api/v1/runs/{run.pk}/manifest/")
        assert manifest["scope"] == "public items only" and manifest["items_withheld"] == len(hidden)
        assert {i["item"] for i in manifest["items"]}.isdisjoint(hidden)
        assert len(manifest["items"]) == run.total_items - len(hidden) and manifest_verify(manifest)
        text = json.dumps(manifest)
        assert "dampnest" not in text and not any(h in text for h in hidden_answers)
    page = download_body(client.get(reverse("run-manifest", args=[run.pk]))).decode()
    assert "dampnest" not in page
    full = manifest_get(api(maintainer), f"/api/v1/runs/{run.pk}/manifest/")
    assert full["items_withheld"] == 0 and hidden <= {i["item"] for i in full["items"]}


def test_the_worker_host_is_in_no_public_manifest_or_page_of_a_run(client, release, author, maintainer):
    """Which machine ran an item is the platform's, not the run's: a manifest names it to maintainers only (who also
    see it on the operations page); the anonymous reader, the run's page and a signed-in author see no host."""
    run = recorded(release)
    for caller in (api(), api(author)):
        manifest = manifest_get(caller, f"/api/v1/runs/{run.pk}/manifest/")
        assert manifest["items"] and all(set(i) == ITEM_FIELDS - {"worker"} for i in manifest["items"])
        assert "w1@host" not in json.dumps(manifest) and manifest_verify(manifest)
    assert b"w1@host" not in download_body(client.get(reverse("run-manifest", args=[run.pk])))
    assert "w1@host" not in client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "w1@host" not in api().get(f"/api/v1/runs/{run.pk}/").content.decode()
    full = manifest_get(api(maintainer), f"/api/v1/runs/{run.pk}/manifest/")
    assert {i["worker"] for i in full["items"]} == {"w1@host"}


def test_manifest_of_a_draft_version_run_is_not_found(release, author):
    run = recorded(release)
    release.status = "draft"
    release.save(update_fields=["status"])
    assert api(author).get(f"/api/v1/runs/{run.pk}/manifest/").status_code == 404


def test_schema_lists_the_manifest_endpoint():
    schema = api().get("/api/v1/schema/", {"format": "json"}).json()
    assert "/api/v1/runs/{id}/manifest/" in schema["paths"]


@pytest.fixture
def bwrap(sandbox_cache, executor_backend):
    executor_backend(sandbox_backend_or_missing("bwrap", sandbox_cache))
    yield


def test_reference_run_records_its_lock_and_reproduces_fully_until_a_verdict_is_tampered(release, bwrap, sandbox_cache):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release).order_by("pk"):
        item_evaluate.apply(args=(run.pk, snippet.pk, 0), throw=True)
    run.refresh_from_db()
    assert run.status == "completed" and run.scores.get(paper=None, split="").scaled_pass_rate == 100.0

    outcomes = list(Outcome.objects.filter(run=run).select_related("environment_lock", "snippet__task"))
    assert all(o.environment_lock and o.limits["wall_seconds"] > 0 and o.worker for o in outcomes)
    numpy_task = next(o for o in outcomes if "numpy" in o.snippet.task.requirements)
    lock = numpy_task.environment_lock.lock
    assert lock["kind"] == "venv" and lock["python"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}")
    (dist_info,) = (sandbox_cache / "venvs" / numpy_task.environment_hash).glob(
        "lib/python*/site-packages/numpy-*.dist-info"
    )
    assert lock["distributions"]["numpy"] == dist_info.name.removeprefix("numpy-").removesuffix(".dist-info")
    assert numpy_task.environment_lock.lock_hash == canonical_hash(lock)

    out = StringIO()
    call_command("run_reproduce", str(run.pk), stdout=out)
    text = out.getvalue()
    assert f"summary: {run.total_items} of {run.total_items} item(s) agree (100.0%), 0 disagree" in text
    assert "DISAGREE" not in text and text.count("agree    item ") == run.total_items

    tampered = outcomes[0]
    Outcome.objects.filter(pk=tampered.pk).update(status="failed", category="wrong_result")
    out = StringIO()
    with pytest.raises(CommandError, match=f"1 of {run.total_items} item\\(s\\) of run {run.pk} disagree"):
        call_command("run_reproduce", str(run.pk), stdout=out)
    text = out.getvalue()
    assert (
        f"DISAGREE item {tampered.snippet_id} sample 0 {tampered.snippet.task.paper.slug}:{tampered.snippet.name}: "
        "stored failed/wrong_result, now passed"
    ) in text
    assert f"summary: {run.total_items - 1} of {run.total_items} item(s) agree" in text


def test_run_reproduce_names_a_missing_run(db):
    with pytest.raises(CommandError, match="no run with id 999999"):
        call_command("run_reproduce", "999999", stdout=StringIO())


def test_docker_lock_is_the_image_id(tmp_path):
    import docker
    from sandbox import backend_get

    backend = backend_get("docker", cache_dir=tmp_path)
    ok, reason = backend.available()
    if not ok:
        service_missing("Docker", reason)
    env_hash = hashlib.sha256(b"rcb-test-docker-empty").hexdigest()
    environment = backend.environment_build(env_hash=env_hash, requirements="# nothing to install\n")
    lock = backend.environment_lock(environment)
    client = docker.from_env()
    try:
        assert lock == {
            "kind": "image",
            "image": environment.location,
            "image_id": client.images.get(environment.location).id,
        }
    finally:
        client.close()
    assert lock["image_id"].startswith("sha256:")


def test_items_without_a_recorded_answer_are_skipped_not_disagreements(release, settings, executor_backend):
    settings.SANDBOX_BACKEND = "local"  # nothing runs: every item lacks an answer
    executor_backend(None)
    entry = ModelEntry.objects.create(name="flaky", display_name="Flaky", litellm_model="openai/flaky")
    run = services.run_start(model=entry, version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release).select_related("task"):
        generation = services.generation_record(run=run, snippet=snippet, sample=0, prompt="p", error="HTTP 500")
        services.outcome_record(
            run=run,
            snippet=snippet,
            sample=0,
            generation=generation,
            verdict=Verdict("error", "infrastructure", "no answer: HTTP 500"),
        )
    out = StringIO()
    call_command("run_reproduce", str(run.pk), stdout=out)
    assert out.getvalue().count("skipped  item ") == run.total_items
    assert f"0 disagree, {run.total_items} skipped (no answer recorded)" in out.getvalue()
