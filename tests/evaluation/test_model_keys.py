"""Attacks on model registration and runs: a user's model gets its own key only, public https endpoints only,
allow-listed generation params only; the platform's provider keys never leave for it, through a real worker."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from benchmarks.services.maintainers import maintainer_grant
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry
from tests.conftest import client_for, polled
from tests.evaluation.openai_server import openai_server
from tests.evaluation.test_llm import PLATFORM_SECRETS

OWN_KEY = "sk-authors-own-key-5e1d"


@pytest.fixture
def server():
    with openai_server(responder=lambda prompt, body: "```python\npass\n```") as running:
        yield running


def _register(client, **fields):
    body = {"name": "attack", "display_name": "Attack", "litellm_model": "openai/attack", "api_key": OWN_KEY, **fields}
    return client.post("/api/v1/models/", body, format="json")


def _refusal(response) -> dict:
    assert response.status_code == 400, response.content[:500]
    return response.json()["error"]["details"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("api_base", "message"),
    [
        ("http://127.0.0.1:{port}/v1", "api_base must use https:// (got http://)"),
        ("https://127.0.0.1:{port}/v1", "api_base host 127.0.0.1 is a loopback address; refused"),
        ("https://localhost:{port}/v1", "api_base host localhost resolves to a loopback address"),
        ("https://[::1]:{port}/v1", "api_base host ::1 is a loopback address; refused"),
        ("https://10.1.2.3/v1", "api_base host 10.1.2.3 is a private-network address; refused"),
        ("https://169.254.169.254/latest", "api_base host 169.254.169.254 is a link-local address; refused"),
        ("https://user:pw@api.example.org/v1", "api_base must not contain credentials"),
        ("https://api.example.org:99999/v1", "api_base has an invalid port"),
    ],
)
def test_an_author_cannot_register_a_model_at_a_local_or_private_address(api_base, message, author, server, settings):
    settings.MODEL_API_ALLOWED_HOSTS = []
    port = server.base_url.rsplit(":", 1)[1].split("/")[0]
    details = _refusal(_register(client_for(author), api_base=api_base.format(port=port)))
    assert message in " ".join(details["api_base"])
    assert not ModelEntry.objects.filter(name="attack").exists() and server.requests == []


@pytest.mark.django_db
def test_an_author_cannot_point_an_existing_model_at_a_local_address(author, server, settings):
    settings.MODEL_API_ALLOWED_HOSTS = []
    client = client_for(author)
    assert _register(client).status_code == 201
    details = _refusal(
        client.patch("/api/v1/models/attack/", {"api_base": server.base_url.replace("http", "https")}, format="json")
    )
    assert "loopback address" in " ".join(details["api_base"])
    assert ModelEntry.objects.get(name="attack").api_base == ""


@pytest.mark.django_db
def test_only_maintainers_register_models_without_a_key_of_their_own(author, maintainer, server):
    details = _refusal(_register(client_for(author), api_key=""))
    assert "api_key is required" in " ".join(details["api_key"])
    uploads_only = _register(
        client_for(author), name="answers-made-elsewhere", kind="uploaded", litellm_model="", api_key=""
    )
    assert uploads_only.status_code == 201 and uploads_only.json()["kind"] == "uploaded"

    platform = _register(client_for(maintainer), name="platform-paid", api_key="", api_base=server.base_url)
    assert platform.status_code == 201, platform.content  # local servers and the platform's keys: maintainers
    assert platform.json()["has_api_key"] is False


@pytest.mark.django_db
def test_providers_that_would_take_the_platforms_credentials_are_refused_for_an_author(author):
    details = _refusal(_register(client_for(author), litellm_model="bedrock/anthropic.claude-3"))
    assert "takes credentials from the platform's environment" in " ".join(details["litellm_model"])
    details = _refusal(_register(client_for(author), litellm_model="no-such-provider/x"))
    assert "litellm does not know the provider" in " ".join(details["litellm_model"])


@pytest.mark.django_db
def test_an_author_cannot_run_a_model_without_its_own_key(author, maintainer, release):
    model = services.model_register(
        name="keyed", display_name="K", litellm_model="openai/k", api_key=OWN_KEY, owner=author
    )
    ModelEntry.objects.filter(pk=model.pk).update(api_key_encrypted="")  # e.g. cleared by a maintainer
    response = client_for(author).post("/api/v1/runs/", {"model": "keyed", "release": release.name}, format="json")
    assert response.status_code == 400 and "no API key of its own" in response.json()["error"]["message"]
    assert not EvaluationRun.objects.exists()
    with pytest.raises(services.EvaluationError, match="only maintainers run it"):
        services.run_start(model=ModelEntry.objects.get(pk=model.pk), version=release, user=author, dispatch=False)
    assert (
        services.run_start(
            model=ModelEntry.objects.get(pk=model.pk), version=release, user=maintainer, dispatch=False
        ).model
        == model
    )


@pytest.mark.django_db
def test_unknown_generation_params_are_refused_at_registration_and_run_start(author, release):
    client = client_for(author)
    details = _refusal(_register(client, default_params={"temperature": 0, "api_base": "http://127.0.0.1:1"}))
    assert "unknown generation parameter 'api_base'" in " ".join(details["default_params"])
    assert not ModelEntry.objects.filter(name="attack").exists()

    assert _register(client, default_params={"temperature": 0.2, "max_tokens": 256}).status_code == 201
    details = _refusal(
        client.patch("/api/v1/models/attack/", {"default_params": {"extra_body": {"x": 1}}}, format="json")
    )
    assert "unknown generation parameter 'extra_body'" in " ".join(details["default_params"])

    for params, message in (
        ({"mock_response": "pass"}, "unknown generation parameter 'mock_response'"),
        ({"temperature": 9}, "params.temperature must be a number from 0 to 2 (got 9)"),
        ({"n": 5}, "unknown generation parameter 'n'"),
    ):
        response = client.post(
            "/api/v1/runs/", {"model": "attack", "release": release.name, "params": params}, format="json"
        )
        assert message in " ".join(_refusal(response)["params"])
    assert not EvaluationRun.objects.exists()
    started = client.post(
        "/api/v1/runs/",
        {
            "model": "attack",
            "release": release.name,
            "params": {"temperature": 0, "seed": 1, "reasoning_effort": "low"},
        },
        format="json",
    )
    assert started.status_code == 201, started.content


@pytest.mark.django_db
def test_the_call_is_checked_again_where_it_is_made(author, maintainer, release):
    model = services.model_register(
        name="keyed", display_name="K", litellm_model="openai/k", api_key=OWN_KEY, owner=author
    )
    run = services.run_start(model=model, version=release, user=author, dispatch=False)
    call = services.model_call(run=run)
    assert (call.api_key, call.platform_key, call.private_addresses) == (OWN_KEY, False, False)

    ModelEntry.objects.filter(pk=model.pk).update(api_key_encrypted="")
    run.refresh_from_db()
    with pytest.raises(services.EvaluationError, match="has no API key of its own"):
        services.model_call(run=run)

    maintainer_grant(user=author)  # a maintainer's model may use the platform's keys and local servers
    author.refresh_from_db()
    call = services.model_call(run=EvaluationRun.objects.select_related("model", "created_by").get(pk=run.pk))
    assert (call.api_key, call.platform_key, call.private_addresses) == (None, True, True)


# --- the web forms: the same refusals -------------------------------------------------------------------


def _form(client, **fields):
    values = {
        "name": "attack",
        "display_name": "Attack",
        "kind": "litellm",
        "litellm_model": "openai/attack",
        "api_key": OWN_KEY,
        **fields,
    }
    return client.post(reverse("model-new"), values)


@pytest.mark.django_db
def test_the_register_form_refuses_local_addresses_keyless_models_and_unknown_params(client, author, server, settings):
    settings.MODEL_API_ALLOWED_HOSTS = []
    client.force_login(author)
    assert client.get(reverse("model-new")).status_code == 200
    for fields, message in (
        ({"api_base": server.base_url}, "api_base must use https:// (got http://)"),
        ({"api_base": server.base_url.replace("http://", "https://")}, "is a loopback address; refused"),
        ({"api_base": "https://169.254.169.254/latest"}, "169.254.169.254 is a link-local address"),
        ({"api_key": ""}, "api_key is required"),
        ({"default_params": '{"api_base": "http://127.0.0.1:1"}'}, "unknown generation parameter &#x27;api_base&#x27;"),
    ):
        response = _form(client, **fields)
        assert response.status_code == 400 and message in response.content.decode(), fields
    assert not ModelEntry.objects.filter(name="attack").exists() and server.requests == []
    # The re-rendered form of the same POST keeps the key typed (issue 22: it was wiped), uncached; nothing else
    # shows it (tests/evaluation/test_model_form.py).
    refused = _form(client, api_key=OWN_KEY, api_base="http://x")
    assert f'value="{OWN_KEY}"' in refused.content.decode() and "no-store" in refused["Cache-Control"]
    assert OWN_KEY not in client.get(reverse("model-new")).content.decode()

    response = _form(client, default_params='{"temperature": 0}')
    assert response.status_code == 302 and response["Location"] == reverse("model-detail", args=["attack"])
    model = ModelEntry.objects.get(name="attack")
    assert (model.owner, model.api_key_get(), model.default_params) == (author, OWN_KEY, {"temperature": 0})


@pytest.mark.django_db
def test_the_run_form_refuses_unknown_params_and_strangers(client, author, other_author, release):
    services.model_register(name="keyed", display_name="K", litellm_model="openai/k", api_key=OWN_KEY, owner=author)
    url = reverse("run-new", args=["keyed"])
    client.force_login(other_author)
    assert "Start a run" not in client.get(reverse("model-detail", args=["keyed"])).content.decode()
    assert client.post(url, {"release": release.name, "samples": 1}).status_code == 403
    client.force_login(author)
    assert "Start a run" in client.get(reverse("model-detail", args=["keyed"])).content.decode()
    for params, message in (
        ('{"mock_response": "pass"}', "unknown generation parameter &#x27;mock_response&#x27;"),
        ('{"top_p": 3}', "params.top_p must be a number from 0 to 1 (got 3)"),
    ):
        response = client.post(url, {"release": release.name, "samples": 1, "with_paper": "on", "params": params})
        assert response.status_code == 400 and message in response.content.decode()
    assert not EvaluationRun.objects.exists()
    response = client.post(url, {"release": release.name, "samples": 1, "params": '{"temperature": 0}'})
    run = EvaluationRun.objects.get()
    assert response["Location"] == reverse("run-detail", args=[run.pk])
    assert (run.params, run.with_paper, run.created_by) == ({"temperature": 0}, False, author)


# --- through a real worker --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_real_worker_sends_an_authors_model_its_own_key_and_never_the_platforms(
    author, release, celery_worker_factory, settings
):
    """The worker holds fake provider keys of every kind; the author's endpoint (https, made public for the test by
    MODEL_API_ALLOWED_HOSTS, the exemption an in-house server would get) must see the model's own key only."""
    settings.MODEL_API_ALLOWED_HOSTS = ["127.0.0.1"]
    # Every item fed at once: this worker only generates, and no sandbox worker ends items to make room.
    settings.RUN_ITEMS_IN_FLIGHT = settings.USER_ITEMS_IN_FLIGHT = 1000
    # Every item of the rebound run is to be refused at the worker: no pause after the first few (issue 22's fail-fast).
    settings.RUN_PAUSE_AFTER_FAILURES = 0
    client = client_for(author)
    with openai_server(responder=lambda prompt, body: "```python\npass\n```", tls=True) as server:
        worker = celery_worker_factory(
            queues="llm",
            MODEL_API_ALLOWED_HOSTS="127.0.0.1",
            SSL_CERT_FILE=server.ca_file,
            RUN_ITEMS_IN_FLIGHT="1000",
            USER_ITEMS_IN_FLIGHT="1000",
            RUN_PAUSE_AFTER_FAILURES="0",
            **PLATFORM_SECRETS,
        )
        registered = _register(client, api_base=server.base_url, default_params={"temperature": 0})
        assert registered.status_code == 201, registered.content
        started = client.post("/api/v1/runs/", {"model": "attack", "release": release.name}, format="json")
        assert started.status_code == 201, started.content
        run = EvaluationRun.objects.get(pk=started.json()["id"])
        polled(
            lambda: Generation.objects.filter(run=run).count() == run.total_items,
            timeout=300,
            worker=worker,
            what="every item's answer",
        )
        assert not Generation.objects.filter(run=run).exclude(error="").exists()
        assert len(server.chat_requests) == run.total_items
        sent = "\n".join(f"{r.path}\n{r.headers}\n{json.dumps(r.body)}" for r in server.requests)
        assert {r.headers["Authorization"] for r in server.requests} == {f"Bearer {OWN_KEY}"}
        assert [name for name, value in PLATFORM_SECRETS.items() if value in sent] == []

        # The endpoint's name resolves to loopback once the run has started (as after a DNS change): the model's
        # edit refuses it, and so does the worker, where it connects to the run's snapshot.
        services.run_cancel(run=run)
        refused = client.patch(
            "/api/v1/models/attack/", {"api_base": server.base_url.replace("127.0.0.1", "localhost")}, format="json"
        )
        assert "localhost resolves to a loopback address" in refused.content.decode()
        rebound = services.run_start(
            model=ModelEntry.objects.get(name="attack"), version=release, user=author, with_paper=False, dispatch=False
        )
        EvaluationRun.objects.filter(pk=rebound.pk).update(api_base=server.base_url.replace("127.0.0.1", "localhost"))
        services.run_dispatch(run=rebound)
        polled(
            lambda: Generation.objects.filter(run=rebound).count() == rebound.total_items,
            timeout=300,
            worker=worker,
            what="every item of the rebound run",
        )
        errors = set(Generation.objects.filter(run=rebound).values_list("error", flat=True))
        assert len(errors) == 1 and "not called: the model's endpoint host resolves to a loopback" in errors.pop()
        assert len(server.requests) == run.total_items  # nothing more arrived
    assert OWN_KEY not in worker.output()
    assert [name for name, value in PLATFORM_SECRETS.items() if value in worker.output()] == []
