"""Issue 5's finish line on the demo release, with a real worker, Redis and a local OpenAI-compatible server:
a model registered through the API is evaluated and shows on the public leaderboard with intervals and the
per-paper breakdown; the same answers uploaded as a generations file score identically."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from benchmarks.selectors import version_snippets
from benchmarks.services.psets import pset_import
from evaluation.models import EvaluationRun, RunScore
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing
from tests.evaluation.openai_server import openai_server

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def wait_completed(client: APIClient, run_id: int, worker, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/v1/runs/{run_id}/").json()
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.5)
    pytest.fail(f"run {run_id} did not complete\n{worker.output()[-4000:]}")


def test_api_model_run_leaderboard_and_identical_upload(
    author, media_root, celery_worker_factory, sandbox_cache, settings
):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    version = pset_import(root=DEMO_PSET, version_name="demo-1.0.0", publish=True).version
    references = {s.name: s.reference_code for s in version_snippets(version=version)}
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=author).key}")

    def answer(prompt: str, body: dict) -> str:
        name = re.findall(r'# TODO: Implement block "([^"]+)"', prompt)[0]
        return f"```python\n{references[name]}```"

    # An author's model needs https at a public address: the local server is exempted as an in-house one would be.
    settings.MODEL_API_ALLOWED_HOSTS = ["127.0.0.1"]
    with openai_server(responder=answer, tls=True) as server:
        worker = celery_worker_factory(
            queues="default,llm,sandbox",
            SANDBOX_BACKEND="bwrap",
            MODEL_API_ALLOWED_HOSTS="127.0.0.1",
            SSL_CERT_FILE=server.ca_file,
        )
        model = api.post(
            "/api/v1/models/",
            {
                "name": "local-gpt",
                "display_name": "Local GPT",
                "organization": "Test lab",
                "litellm_model": "openai/rcb-local",
                "api_base": server.base_url,
                "api_key": "sk-e2e",
                "knowledge_cutoff": "2024-12-31",
            },
            format="json",
        )
        assert model.status_code == 201, model.content
        started = api.post("/api/v1/runs/", {"model": "local-gpt", "release": "demo-1.0.0"}, format="json")
        assert started.status_code == 201, started.content
        generated = wait_completed(api, started.json()["id"], worker)
    assert generated["status"] == "completed" and generated["score"]["scaled_pass_rate"] == 100.0

    page = APIClient().get("/versions/demo-1.0.0/leaderboard/").content.decode()
    assert "Local GPT" in page and "[100.0, 100.0]" in page
    heat = APIClient().get("/versions/demo-1.0.0/leaderboard/?view=papers").content.decode()
    assert all(slug in heat for slug in ("dampnest", "topk-attention-pool", "trimmed-infonce"))

    rows = api.get(f"/api/v1/runs/{generated['id']}/results/").json()["results"]
    lines = [
        json.dumps({"id": str(r["item"]), "sample": r["sample"], "answer": f"```python\n{r['extracted_code']}```"})
        for r in rows
    ]
    assert len(lines) == 33
    upload = api.post(
        "/api/v1/runs/upload/",
        {
            "model": "local-gpt",
            "release": "demo-1.0.0",
            "file": SimpleUploadedFile("answers.jsonl", "\n".join(lines).encode()),
        },
        format="multipart",
    )
    assert upload.status_code == 201, upload.content
    uploaded = wait_completed(api, upload.json()["id"], worker)

    fields = ("items", "passed", "failed", "errors", "pass_rate", "scaled_pass_rate", "scaled_ci_low", "scaled_ci_high")
    own = RunScore.objects.get(run_id=generated["id"], paper=None, split="")
    theirs = RunScore.objects.get(run_id=uploaded["id"], paper=None, split="")
    assert [getattr(theirs, f) for f in fields] == [getattr(own, f) for f in fields]
    assert EvaluationRun.objects.get(pk=uploaded["id"]).generations.count() == 33
