"""The site with its one Redis (cache and broker, as docker-compose.yml has it) stopped: every read page and API
read still answers 200 (ranks computed without the cache, throttles counted in the process's memory), and a write
that needs the broker is stored and dispatched later, never a 500 with nothing stored."""

from __future__ import annotations

import json
import time

import pytest
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.throttling import AnonRateThrottle

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.outcomes import Verdict
from operations.events import events_of
from operations.models import OperationsEvent
from submissions.models import SetValidation
from tests.api.conftest import reference_answers
from tests.conftest import DEMO_PSET, _pool_reset, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def site_on_own_redis(own_redis, settings):
    """Cache and broker on the test's own Redis, which the test may stop."""
    from config.celery import app

    settings.CACHES = {
        "default": {
            "BACKEND": "config.caches.RedisCacheWithLocalFallback",
            "LOCATION": own_redis.url,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
        }
    }
    settings.CELERY_BROKER_URL = own_redis.url
    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    app.conf.broker_url, app.conf.broker_transport_options = own_redis.url, {}
    _pool_reset(app)
    yield own_redis
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _pool_reset(app)


def _completed_run(version, model):
    run = services.run_start(model=model, version=version, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=version).select_related("task"):
        generation = services.generation_record(
            run=run, snippet=snippet, sample=0, prompt="p", raw_answer=f"```python\nanswer_{snippet.pk} = 1\n```"
        )
        verdict = Verdict("passed", "", "") if snippet.pk % 2 else Verdict("failed", "wrong_result", "assert")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    return run


READ_PAGES = (
    "/",
    "/versions/{v}/",
    "/versions/{v}/leaderboard/",
    "/versions/{v}/compare/?a={run}&b={other}",
    "/versions/{v}/difficulty/",
    "/runs/{run}/",
    "/runs/{run}/manifest.json",
    "/models/{model}/",
)
API_READS = (
    "/api/v1/releases/",
    "/api/v1/releases/{v}/",
    "/api/v1/releases/{v}/items/",
    "/api/v1/releases/{v}/leaderboard/",
    "/api/v1/releases/{v}/leaderboard.csv",
    "/api/v1/releases/{v}/difficulty/",
    "/api/v1/releases/{v}/compare/?a={run}&b={other}",
    "/api/v1/models/",
    "/api/v1/models/{model}/",
    "/api/v1/runs/{run}/",
    "/api/v1/runs/{run}/results/",
    "/api/v1/runs/{run}/manifest/",
    "/api/v1/schema/",
)


def test_every_read_answers_and_an_upload_is_stored_while_redis_is_down(
    site_on_own_redis, client, media_root, author, maintainer, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr("config.caches.RETRY_SECONDS", 0.5)
    version = pset_import(root=DEMO_PSET, version_name="outage-1.0.0", publish=True).version
    model = ModelEntry.objects.create(name="m1", display_name="M1", litellm_model="openai/m1")
    run = _completed_run(version, model)
    other = _completed_run(version, ModelEntry.objects.create(name="m2", display_name="M2", litellm_model="openai/m2"))
    names = {"v": version.name, "run": run.pk, "other": other.pk, "model": model.name}
    api = client_for(author)
    assert (
        client.get(f"/versions/{version.name}/leaderboard/").status_code == 200
    )  # ranks cached in Redis while it is up

    site_on_own_redis.kill()
    answers = {path.format(**names): client.get(path.format(**names)).status_code for path in READ_PAGES}
    answers |= {path.format(**names): api.get(path.format(**names)).status_code for path in API_READS}
    assert answers == dict.fromkeys(answers, 200), answers
    assert client.get("/healthz").status_code == 503, "the health check says the broker is down, without a 500"

    # Throttles still count (in this process's memory), rather than failing or letting everything through.
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/min"})
    anonymous = [client_for(None).get("/api/v1/releases/").status_code for _ in range(4)]
    assert anonymous == [200, 200, 200, 429]

    # An upload needs the broker to be scored: it is stored whole and dispatched once the broker answers.
    uploader = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/runs/upload/",
            {
                "file": SimpleUploadedFile("answers.jsonl", reference_answers(version)),
                "model": uploader.name,
                "release": version.name,
            },
            format="multipart",
        )
    assert response.status_code == 201, response.content[:500]
    uploaded = EvaluationRun.objects.get(pk=response.json()["id"])
    assert uploaded.generations.count() == uploaded.total_items > 0
    assert events_of(subject=uploaded, kinds=[OperationsEvent.Kind.BROKER_UNAVAILABLE]).exists()

    # A run started through the API is stored too; its items wait for the watchdog.
    with django_capture_on_commit_callbacks(execute=True):
        started = client_for(maintainer).post(
            "/api/v1/runs/",
            json.dumps({"model": "reference", "release": version.name}),
            content_type="application/json",
        )
    assert started.status_code == 201, started.content[:500]
    assert events_of(
        subject=EvaluationRun.objects.get(pk=started.json()["id"]), kinds=[OperationsEvent.Kind.BROKER_UNAVAILABLE]
    ).exists()

    # A maintainer validating a draft version: stored, said, and its papers queued by the watchdog later.
    draft = pset_import(root=DEMO_PSET, version_name="outage-2.0.0").version
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        validating = client.post(f"/versions/{draft.name}/validate/")
    assert validating.status_code == 302, validating.content[:500]
    assert events_of(
        subject=SetValidation.objects.get(version=draft), kinds=[OperationsEvent.Kind.BROKER_UNAVAILABLE]
    ).exists()

    site_on_own_redis.start()
    time.sleep(0.6)
    cache = caches["default"]
    cache.set("back", 1)
    assert cache.get("back") == 1 and cache.local.get("back") is None, "Redis answers again, after the retry pause"
