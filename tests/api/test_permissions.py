"""Who may call what: every endpoint and method, as anonymous, owner, another user and a maintainer."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.authtoken.models import Token

from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry
from tests.api.conftest import reference_answers

pytestmark = pytest.mark.django_db

CALLERS = ("anonymous", "owner", "other", "maintainer")
EVERYONE = {"anonymous": 200, "owner": 200, "other": 200, "maintainer": 200}
SIGNED_IN = {"anonymous": 401, "owner": 201, "other": 201, "maintainer": 201}
OWNER_OR_MAINTAINER = {"anonymous": 401, "owner": 200, "other": 403, "maintainer": 200}


@pytest.fixture
def world(release, author):
    """A model and a queued run of the author's on the release."""
    model = services.model_register(
        name="ada-model", display_name="Ada", litellm_model="openai/ada", owner=author, api_key="sk-ada"
    )
    run = services.run_start(model=model, version=release, user=author, dispatch=False)
    return {"release": release, "model": model, "run": run, "item": version_snippets(version=release).first()}


def _request(client, caller: str, method: str, url: str, world: dict):
    """The request a caller makes; bodies are valid so that only permissions decide."""
    release = world["release"].name
    if method == "post-model":
        return client.post(
            url,
            {"name": f"m-{caller}", "display_name": "M", "litellm_model": "openai/m", "api_key": "sk-m"},
            format="json",
        )
    if method == "patch-model":
        return client.patch(url, {"display_name": f"renamed by {caller}"}, format="json")
    if method == "post-run":
        return client.post(url, {"model": world["model"].name, "release": release, "samples": 1}, format="json")
    if method == "post-upload":
        upload = SimpleUploadedFile("answers.jsonl", reference_answers(world["release"]))
        return client.post(url, {"file": upload, "model": world["model"].name, "release": release}, format="multipart")
    if method == "post-verify":
        return client.post(url, {"reason": f"checked by {caller}"}, format="json")
    return getattr(client, method)(url)


READS = [
    ("get", "/api/v1/releases/"),
    ("get", "/api/v1/releases/{release}/"),
    ("get", "/api/v1/releases/{release}/downloads/items/"),
    ("get", "/api/v1/releases/{release}/downloads/pset/"),
    ("get", "/api/v1/releases/{release}/items/"),
    ("get", "/api/v1/releases/{release}/items/{item}/"),
    ("get", "/api/v1/releases/{release}/leaderboard/"),
    ("get", "/api/v1/releases/{release}/leaderboard.csv"),
    ("get", "/api/v1/models/"),
    ("get", "/api/v1/models/{model}/"),
    ("get", "/api/v1/runs/{run}/"),
    ("get", "/api/v1/runs/{run}/manifest/"),
    ("get", "/api/v1/schema/"),
    ("get", "/api/v1/docs/"),
]
WRITES = [
    ("post-model", "/api/v1/models/", SIGNED_IN),
    ("patch-model", "/api/v1/models/{model}/", OWNER_OR_MAINTAINER),
    ("post-run", "/api/v1/runs/", {"anonymous": 401, "owner": 201, "other": 403, "maintainer": 201}),
    ("post-upload", "/api/v1/runs/upload/", {"anonymous": 401, "owner": 201, "other": 403, "maintainer": 201}),
    ("post", "/api/v1/runs/{run}/cancel/", OWNER_OR_MAINTAINER),
    ("post", "/api/v1/runs/{run}/resume/", OWNER_OR_MAINTAINER),
    ("get", "/api/v1/runs/{run}/results/", EVERYONE),  # public items' results; held-out ones: the matrix test
    # The maintainer passes the permission check; the queued run is what is refused.
    ("post-verify", "/api/v1/runs/{run}/verify/", {"anonymous": 401, "owner": 403, "other": 403, "maintainer": 400}),
]
CASES = [(method, url, caller, EVERYONE[caller]) for method, url in READS for caller in CALLERS] + [
    (method, url, caller, expected[caller]) for method, url, expected in WRITES for caller in CALLERS
]


@pytest.mark.parametrize(("method", "url", "caller", "expected"), CASES, ids=[f"{m} {u} {c}" for m, u, c, _ in CASES])
def test_permission(clients, world, method, url, caller, expected):
    url = url.format(
        release=world["release"].name, item=world["item"].pk, model=world["model"].name, run=world["run"].pk
    )
    response = _request(clients[caller], caller, method, url, world)
    assert response.status_code == expected, response.content[:500]
    if expected >= 400:
        error = response.json()["error"]
        assert error["code"] == {400: "invalid", 401: "not_authenticated", 403: "permission_denied"}[expected]
        assert error["message"]


def test_refused_changes_change_nothing(clients, world):
    clients["other"].patch(f"/api/v1/models/{world['model'].name}/", {"display_name": "pwned"}, format="json")
    clients["other"].post(f"/api/v1/runs/{world['run'].pk}/cancel/")
    world["model"].refresh_from_db()
    world["run"].refresh_from_db()
    assert world["model"].display_name == "Ada"
    assert world["run"].status == EvaluationRun.Status.QUEUED
    assert EvaluationRun.objects.count() == 1


@pytest.mark.parametrize(("caller", "expected"), [("other", 403), ("maintainer", 201)])
def test_only_maintainers_run_the_calibration_models(clients, world, caller, expected):
    response = clients[caller].post(
        "/api/v1/runs/", {"model": "reference", "release": world["release"].name}, format="json"
    )
    assert response.status_code == expected
    assert EvaluationRun.objects.filter(model__kind=ModelEntry.Kind.REFERENCE).exists() == (expected == 201)


@pytest.mark.parametrize("caller", ["owner", "other"])
def test_uploads_to_a_calibration_model_are_refused(clients, world, caller):
    upload = SimpleUploadedFile("answers.jsonl", reference_answers(world["release"]))
    response = clients[caller].post(
        "/api/v1/runs/upload/",
        {"file": upload, "model": "reference", "release": world["release"].name},
        format="multipart",
    )
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_session_authentication_works_too(client, world, author):
    client.force_login(author)
    response = client.patch(
        f"/api/v1/models/{world['model'].name}/", {"organization": "Lab"}, content_type="application/json"
    )
    # Session-authenticated unsafe requests need the CSRF token: Django's test client does not enforce it.
    assert response.status_code == 200
    assert response.json()["organization"] == "Lab"


def test_token_page_needs_login(client):
    response = client.get("/accounts/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_token_is_created_shown_once_and_revoked(client, author):
    client.force_login(author)
    response = client.post("/accounts/tokens/", {"action": "create"})
    key = Token.objects.get(user=author).key
    assert key in response.content.decode()
    assert key not in client.get("/accounts/tokens/").content.decode()
    api = client_with_token(key)
    assert (
        api.post(
            "/api/v1/models/",
            {"name": "via-token", "display_name": "T", "litellm_model": "openai/y", "api_key": "k"},
            format="json",
        ).status_code
        == 201
    )
    client.post("/accounts/tokens/", {"action": "revoke"})
    assert not Token.objects.filter(user=author).exists()
    refused = api.get("/api/v1/models/")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "authentication_failed"


def test_a_new_token_replaces_the_old(client, author):
    client.force_login(author)
    client.post("/accounts/tokens/", {"action": "create"})
    first = Token.objects.get(user=author).key
    client.post("/accounts/tokens/", {"action": "create"})
    assert Token.objects.get(user=author).key != first


def client_with_token(key: str):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def test_only_maintainers_set_a_runs_priority(clients, release, author):
    from django.conf import settings

    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(created_by=author)
    for caller in ("anonymous", "owner", "other"):
        response = clients[caller].post(f"/api/v1/runs/{run.pk}/priority/", {"priority": 5}, format="json")
        assert response.status_code in (401, 403), (caller, response.content[:300])
    refused = clients["maintainer"].post(f"/api/v1/runs/{run.pk}/priority/", {"priority": 11}, format="json")
    assert refused.status_code == 400 and "priority" in str(refused.json()["error"]["details"])
    response = clients["maintainer"].post(f"/api/v1/runs/{run.pk}/priority/", {"priority": 5}, format="json")
    assert response.status_code == 200 and response.json()["priority"] == 5
    run.refresh_from_db()
    assert run.priority == 5 and services.run_share(run=run) == 6 * settings.RUN_ITEMS_IN_FLIGHT


@pytest.mark.parametrize("action", ["cancel", "resume", "priority"])
def test_a_run_the_caller_cannot_see_is_not_found_by_its_actions_either(clients, world, action):
    """A run of a draft release is hidden from other users (GET answers 404); its actions answered 403, which told
    that it exists. Now every caller who cannot see it gets the 404 of a run that does not exist."""
    from benchmarks.models import BenchmarkVersion

    BenchmarkVersion.objects.filter(pk=world["release"].pk).update(status=BenchmarkVersion.Status.DRAFT)
    hidden, missing = world["run"].pk, world["run"].pk + 1000
    assert clients["other"].get(f"/api/v1/runs/{hidden}/").status_code == 404
    answers = [
        clients["other"].post(f"/api/v1/runs/{pk}/{action}/", {"priority": 1}, format="json")
        for pk in (hidden, missing)
    ]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].json() == answers[1].json()
    world["run"].refresh_from_db()
    assert world["run"].status == EvaluationRun.Status.QUEUED and world["run"].priority == 0
