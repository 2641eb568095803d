"""A run calls the endpoint it snapshot at its start: the model's endpoint cannot change while a run of it is active,
a resumed run still calls its snapshot after the model changed, held-out prompts are checked per item against the
snapshot; a run at its owner's own api_base is self-reported on every surface, in the words of one function."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse

from benchmarks.models import Snippet, VersionTask
from benchmarks.services.curation import version_task_set
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_publish
from evaluation import services, tasks
from evaluation.llm import ModelCall, complete
from evaluation.models import EvaluationRun, Generation, ModelEntry, Outcome, ProvenanceChange
from evaluation.provenance import provenance_of
from evaluation.selectors import held_out as held_out_selectors
from evaluation.selectors.items import item_prompt
from tests.conftest import DEMO_PSET, client_for, download_body, polled
from tests.evaluation.openai_server import openai_server
from tests.evaluation.test_provenance import uploaded
from tests.leaderboard.test_leaderboard import evaluate

BOARD = "/api/v1/releases/1.0.0/leaderboard/"
OWN_ENDPOINT = "https://93.184.216.34/v1"  # a public address literal: no DNS needed to accept it


def _own_model(author, **fields) -> ModelEntry:
    return services.model_register(
        name="ada-model", display_name="Ada", litellm_model="openai/ada", owner=author, api_key="sk-ada-own", **fields
    )


@pytest.mark.django_db
def test_an_endpoint_edit_during_an_active_run_is_refused_by_the_api_and_the_form(release, author, client):
    model = _own_model(author)
    run = services.run_start(model=model, version=release, user=author, dispatch=False)
    assert (run.litellm_model, run.api_base, run.model_params, run.status) == ("openai/ada", "", {}, "queued")
    api = client_for(author)
    url = f"/api/v1/models/{model.name}/"
    for change in (
        {"api_base": OWN_ENDPOINT},
        {"litellm_model": "openai/other"},
        {"default_params": {"temperature": 1}},
    ):
        refused = api.patch(url, change, format="json")
        assert refused.status_code == 409, refused.content
        field = next(iter(change))
        assert refused.json()["error"]["message"] == (
            f"{field} of model ada-model cannot change while run #{run.pk} is queued or running: each run calls the "
            "endpoint it started with; cancel it or wait until it finishes, then change the model"
        )
    client.force_login(author)
    form = {"display_name": "Ada", "litellm_model": "openai/ada", "api_base": OWN_ENDPOINT}
    page = client.post(reverse("model-edit", args=[model.name]), form)
    assert (
        page.status_code == 400 and f"cannot change while run #{run.pk} is queued or running" in page.content.decode()
    )
    model.refresh_from_db()
    assert (model.api_base, model.litellm_model, model.default_params) == ("", "openai/ada", {}), "nothing changed"
    # What the run does not snapshot may change: the description, the key (a leaked key is rotated at once).
    assert (
        api.patch(url, {"display_name": "Ada 2", "api_key": "sk-ada-new", "api_base": ""}, format="json").status_code
        == 200
    )
    assert ModelEntry.objects.get(pk=model.pk).api_key_get() == "sk-ada-new"

    services.run_cancel(run=run)
    changed = client.post(reverse("model-edit", args=[model.name]), form)
    assert changed.status_code == 302, changed.content.decode()[-2000:]
    assert ModelEntry.objects.get(pk=model.pk).api_base == OWN_ENDPOINT
    run.refresh_from_db()
    assert run.api_base == "" and run.provenance == "verified", "the cancelled run keeps what it started with"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_resumed_run_calls_its_snapshot_even_after_the_model_changed(
    media_root, maintainer, celery_worker_factory, settings
):
    version = pset_import(root=DEMO_PSET, version_name="snap-1.0.0", publish=True).version
    with (
        openai_server(responder=lambda prompt, body: "```python\npass\n```") as first,
        openai_server(responder=lambda prompt, body: "```python\npass\n```") as second,
    ):
        model = services.model_register(
            name="local",
            display_name="Local",
            litellm_model="openai/snap-first",
            api_base=first.base_url,
            api_key="sk-first",
            owner=maintainer,
            default_params={"temperature": 0},
        )
        run = services.run_start(model=model, version=version, user=maintainer, dispatch=False)
        services.run_cancel(run=run)
        services.model_update(
            model=model, api_base=second.base_url, litellm_model="openai/snap-second", default_params={"temperature": 1}
        )
        model.refresh_from_db()
        # The attack without the snapshot: a call made from the model as it is now reaches the new address.
        complete(
            ModelCall(
                model=model.litellm_model,
                api_base=model.api_base,
                api_key=model.api_key_get(),
                params=model.default_params,
                private_addresses=True,
                max_retries=0,
            ),
            "probe",
        )
        assert [(r.body["model"], r.body["temperature"]) for r in second.chat_requests] == [("snap-second", 1)]

        # Every item fed at once: this worker only generates, and no sandbox worker ends items to make room.
        settings.RUN_ITEMS_IN_FLIGHT = settings.USER_ITEMS_IN_FLIGHT = 1000
        worker = celery_worker_factory(queues="llm", RUN_ITEMS_IN_FLIGHT="1000", USER_ITEMS_IN_FLIGHT="1000")
        assert services.run_resume(run=run) == run.total_items
        polled(
            lambda: Generation.objects.filter(run=run).count() == run.total_items,
            timeout=300,
            worker=worker,
            what="every item's answer",
        )
    assert not Generation.objects.filter(run=run).exclude(error="").exists()
    assert len(first.chat_requests) == run.total_items
    assert {(r.body["model"], r.body["temperature"]) for r in first.chat_requests} == {("snap-first", 0)}
    assert len(second.chat_requests) == 1, "only the probe reached the model's new address"


@pytest.fixture
def held_out_version(media_root):
    version = pset_import(root=DEMO_PSET, version_name="held-1.0.0").version
    task = version.tasks.order_by("paper__slug").first()
    version_task_set(version=version, task=task, split=VersionTask.Split.HELD_OUT)
    return version_publish(version=version, downloads_inline=True), task


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
# celery_worker_factory: the test's own broker, where the item handed on to the sandbox queue lands, untested.
@pytest.mark.usefixtures("celery_worker_factory")
def test_held_out_prompts_are_checked_again_per_item_against_the_snapshot(
    held_out_version, author, settings, monkeypatch
):
    version, task = held_out_version
    held = Snippet.objects.filter(task=task).order_by("pk").first()
    with openai_server(responder=lambda prompt, body: "```python\npass\n```") as server:
        # The local server stands in for the provider's own address (where litellm sends a model without api_base).
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
        settings.MODEL_API_ALLOWED_HOSTS = ["127.0.0.1"]
        settings.HELD_OUT_PROVIDERS = frozenset({"openai"})
        run = services.run_start(model=_own_model(author), version=version, user=author, samples=3, dispatch=False)
        assert run.covers_held_out and run.api_base == ""
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        tasks.item_generate.apply(args=(run.pk, held.pk, 0))
        assert len(server.chat_requests) == 1, "while trusted, the held-out prompt goes to the provider"

        settings.HELD_OUT_PROVIDERS = frozenset()  # maintainers withdraw their trust in the provider
        # The attack without the per-item check: the run's call still goes out.
        prompt = item_prompt(held, with_paper=run.with_paper, protocol=run.protocol)
        complete(services.model_call(run=run), prompt)
        assert len(server.chat_requests) == 2
        tasks.item_generate.apply(args=(run.pk, held.pk, 1))
        assert len(server.chat_requests) == 2, "the held-out prompt stayed here"
    outcome = Outcome.objects.get(run=run, snippet=held, sample=1)
    assert (outcome.status, outcome.category) == ("error", "infrastructure")
    assert outcome.detail == "not sent: the run's endpoint is no longer trusted with held-out prompts"
    assert not Generation.objects.filter(run=run, snippet=held, sample=1).exists()

    # A run that covered held-out items at its start but whose snapshot is an owner's address (a run from before
    # snapshots, given its model's edited api_base by the migration) sends no held-out prompt either.
    settings.HELD_OUT_PROVIDERS = frozenset({"openai"})
    run.refresh_from_db()
    assert held_out_selectors.run_sends_held_out(run=run)
    EvaluationRun.objects.filter(pk=run.pk).update(api_base=OWN_ENDPOINT)
    run.refresh_from_db()
    assert not held_out_selectors.run_sends_held_out(run=run)
    tasks.item_generate.apply(args=(run.pk, held.pk, 2))
    assert Outcome.objects.get(run=run, snippet=held, sample=2).detail.startswith("not sent:")


@pytest.mark.django_db
def test_a_run_at_the_owners_endpoint_is_self_reported_on_every_surface(release, author, client):
    model = _own_model(author, api_base=OWN_ENDPOINT)
    run = evaluate(release, model, lambda s: True)
    run.refresh_from_db()
    assert (run.provenance, run.api_base, run.litellm_model) == ("self_reported", OWN_ENDPOINT, "openai/ada")
    statement = provenance_of(run).statement
    assert statement == (
        "self-reported: the platform called the owner's own endpoint, not a provider's own address: it can answer "
        "anything"
    ), "the address itself is its owner's to see (tests/evaluation/test_model_endpoint.py)"
    escaped = statement.replace("'", "&#x27;")

    (row,) = client_for().get(BOARD).json()
    assert (row["provenance"], row["provenance_statement"]) == ("self_reported", statement)
    board = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert f'title="{escaped}">self-reported</span>' in board and ">verified</span>" not in board
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    # Beside its badge the statement does not say the badge's word again.
    beside = escaped.removeprefix("self-reported: ")
    assert f'title="{escaped}">self-reported</span>' in page and f">{beside}</span>" in page
    assert reverse("run-verify", args=[run.pk]) not in page, "a generated run is not an upload to verify"
    detail = client_for().get(f"/api/v1/runs/{run.pk}/").json()
    assert (detail["provenance"], detail["provenance_label"], detail["provenance_statement"]) == (
        "self_reported",
        "self-reported",
        statement,
    )
    assert detail["endpoint"] == {"litellm_model": "openai/ada", "api_base": None, "params": {}}
    assert client_for(author).get(f"/api/v1/runs/{run.pk}/").json()["endpoint"]["api_base"] == OWN_ENDPOINT
    manifest = json.loads(download_body(client_for().get(f"/api/v1/runs/{run.pk}/manifest/")))["run"]
    assert (manifest["provenance"], manifest["provenance_label"], manifest["provenance_statement"]) == (
        "self_reported",
        "self-reported",
        statement,
    )
    assert manifest["endpoint"] == detail["endpoint"]


@pytest.mark.django_db
def test_the_leaderboard_filter_separates_verified_uploads_from_platform_runs(release, author, maintainer, client):
    platform = evaluate(
        release,
        services.model_register(
            name="plain", display_name="Plain", litellm_model="openai/plain", owner=author, api_key="sk-plain"
        ),
        lambda s: True,
    )
    upload = uploaded(release, author, lambda s: True)
    services.run_verify(run=upload, actor=maintainer, reason="regenerated 20 answers at the provider: same")
    upload.refresh_from_db()
    statement = "verified upload: checked by maya, regenerated 20 answers at the provider: same"
    assert provenance_of(upload).statement == statement
    assert (
        provenance_of(platform).statement == "verified: the platform called openai/plain at the provider's own address"
    )
    api = client_for()
    assert [r["model"] for r in api.get(BOARD, {"provenance": "verified"}).json()] == ["plain"]
    (row,) = api.get(BOARD, {"provenance": "verified_upload"}).json()
    assert (row["model"], row["provenance_statement"]) == ("uploader", statement)
    page = client.get(reverse("leaderboard", args=["1.0.0"]), {"provenance": "verified_upload"}).content.decode()
    table = page.split('id="leaderboard-table"')[1].split("</table>")[0]
    assert ">Uploader</a>" in table and ">Plain</a>" not in table and ">verified upload</span>" in table
    assert '<option value="verified_upload" selected>verified upload</option>' in page
    detail = api.get(f"/api/v1/runs/{upload.pk}/").json()
    assert (detail["provenance_label"], detail["provenance_statement"]) == ("verified upload", statement)
    manifest = json.loads(download_body(api.get(f"/api/v1/runs/{upload.pk}/manifest/")))
    assert manifest["run"]["provenance_statement"] == statement


@pytest.mark.django_db
def test_existing_runs_get_their_snapshot_and_provenance_from_the_data_migration(release, author, maintainer):
    migration = importlib.import_module("evaluation.migrations.0018_run_provenance_from_endpoint")
    at_provider = evaluate(release, _own_model(author), lambda s: True)
    at_own = evaluate(
        release,
        services.model_register(
            name="own-base",
            display_name="Own",
            litellm_model="openai/own",
            owner=author,
            api_key="sk-own",
            api_base=OWN_ENDPOINT,
            default_params={"temperature": 0},
        ),
        lambda s: True,
    )
    upload = uploaded(release, author, lambda s: True)
    services.run_verify(run=upload, actor=maintainer, reason="checked")
    reference = evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    # As the previous code stored them: no snapshot, every generated run verified, a verified upload "verified".
    EvaluationRun.objects.update(litellm_model="", api_base="", model_params={})
    EvaluationRun.objects.exclude(pk=upload.pk).update(provenance="verified")
    EvaluationRun.objects.filter(pk=upload.pk).update(provenance="verified")
    ProvenanceChange.objects.update(to_provenance="verified")

    migration.forward(apps, None)
    runs = {r.pk: r for r in EvaluationRun.objects.all()}
    assert (runs[at_provider.pk].provenance, runs[at_provider.pk].litellm_model) == ("verified", "openai/ada")
    own = runs[at_own.pk]
    assert (own.provenance, own.api_base, own.model_params) == ("self_reported", OWN_ENDPOINT, {"temperature": 0})
    (relabel,) = ProvenanceChange.objects.filter(run=own)
    assert (relabel.from_provenance, relabel.to_provenance, relabel.actor) == ("verified", "self_reported", None)
    assert (runs[upload.pk].provenance, runs[upload.pk].litellm_model) == ("verified_upload", "")
    assert ProvenanceChange.objects.get(run=upload).to_provenance == "verified_upload"
    assert (runs[reference.pk].provenance, runs[reference.pk].litellm_model) == ("verified", "")
    page = Client().get(reverse("run-detail", args=[own.pk])).content.decode()
    assert "verified → self-reported by the platform" in page

    migration.backward(apps, None)
    assert set(EvaluationRun.objects.values_list("provenance", flat=True)) == {"verified"}
    assert not ProvenanceChange.objects.filter(run=own).exists()
