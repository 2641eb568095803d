"""Runs their owners can steer from the web: Cancel and Resume on the run page (the API's services and rule), and
a run whose model calls keep failing the same way pauses itself with a banner saying why and how to resume."""

from __future__ import annotations

import contextlib
import time

import pytest
from django.urls import reverse

from evaluation import services
from evaluation.models import EvaluationRun, Generation, Outcome
from tests.api.conftest import reference_answers
from tests.conftest import embedded_worker, polled


@pytest.mark.django_db
def test_the_run_page_cancels_for_its_owner_only(
    client, release, author, other_author, django_capture_on_commit_callbacks
):
    model = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    with django_capture_on_commit_callbacks(execute=False):  # stored, not dispatched: it stays queued
        run = services.run_from_upload(model=model, version=release, data=reference_answers(release), user=author)
    page = reverse("run-detail", args=[run.pk])
    client.force_login(other_author)
    assert "Cancel run" not in client.get(page).content.decode()
    assert client.post(reverse("run-cancel", args=[run.pk])).status_code == 403
    assert EvaluationRun.objects.get(pk=run.pk).is_active
    client.force_login(author)
    body = client.get(page).content.decode()
    assert f'action="{reverse("run-cancel", args=[run.pk])}"' in body and "Resume run" not in body
    after = client.post(reverse("run-cancel", args=[run.pk]), follow=True).content.decode()
    assert EvaluationRun.objects.get(pk=run.pk).status == "cancelled"
    assert f"Run {run.pk} cancelled" in after and f'action="{reverse("run-resume-own", args=[run.pk])}"' in after
    again = client.post(reverse("run-cancel", args=[run.pk]), follow=True).content.decode()
    assert "only queued or running runs can be cancelled" in again


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_run_with_a_bad_key_pauses_itself_and_resumes_from_the_web(client, release, maintainer, tmp_path, settings):
    """Five 401s in a row: the run stops asking (the other 28 items are never sent), says why on its page, and
    Resume on the page asks the failed items again: with the endpoint answering, every item gets its answer. (The
    worker takes no sandbox queue: scoring the answers is the pipeline tests' concern, not steering's.)"""
    import re

    from benchmarks.models import Snippet
    from tests.evaluation.openai_server import openai_server

    references = {s.name: s.reference_code for s in Snippet.objects.filter(task__versions=release)}

    def answer(prompt: str, body: dict) -> str:
        name = re.findall(r'# TODO: Implement block "([^"]+)"', prompt)[0]
        return f"```python\n{references[name]}```"

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(openai_server(responder=answer, failures=[401] * 5))
        model = services.model_register(
            name="local-gpt",
            display_name="Local GPT",
            litellm_model="openai/rcb-local",
            api_base=server.base_url,
            api_key="sk-wrong-key",
            owner=maintainer,
        )
        # The filesystem broker, as `make run`: this worker is the only one that can take these tasks.
        # Every item fed at once: this worker only generates, and no sandbox worker ends items to make room.
        settings.RUN_ITEMS_IN_FLIGHT = settings.USER_ITEMS_IN_FLIGHT = 1000
        worker = stack.enter_context(
            embedded_worker(
                tmp_path,
                queues="default,llm",
                env={"RUN_PAUSE_AFTER_FAILURES": "5", "RUN_ITEMS_IN_FLIGHT": "1000", "USER_ITEMS_IN_FLIGHT": "1000"},
            )
        )[0]
        run = services.run_start(model=model, version=release, user=maintainer)
        paused = polled(
            lambda: EvaluationRun.objects.filter(pk=run.pk, status="cancelled").first(),
            timeout=300,
            what="the pause",
            worker=worker,
        )
        time.sleep(2)  # the items still queued reach the worker and are skipped, not sent
        assert len(server.chat_requests) == 5
        assert paused.pause_reason.startswith("API calls are failing: ") and "401" in paused.pause_reason
        assert "sk-wrong-key" not in paused.pause_reason

        client.force_login(maintainer)
        page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
        banner = page[page.index("data-run-paused") :].split("</div>")[0]
        assert "API calls are failing:" in banner and "401" in banner and "Resume run" in banner
        assert f'action="{reverse("run-resume-own", args=[run.pk])}"' in page
        # Said as what it is: paused (not cancelled), no answer counted for a failed call, the edit page linked.
        assert (
            '<span class="badge cancelled">Paused</span>' in page
            and "0 answers generated, 5 model calls failed" in page
        )
        assert reverse("model-edit", args=[run.model.name]) in banner

        client.post(reverse("run-resume-own", args=[run.pk]))
        assert EvaluationRun.objects.get(pk=run.pk).pause_reason == ""
        polled(
            lambda: Generation.objects.filter(run=run, error="").count() == 33,
            timeout=300,
            what="the resumed run's answers",
            worker=worker,
        )
    assert len(server.chat_requests) == 5 + 33
    assert not Generation.objects.filter(run=run).exclude(error="").exists()
    assert not Outcome.objects.filter(run=run).exists(), "the failed calls' outcomes went with them"
    assert EvaluationRun.objects.get(pk=run.pk).status == "running"
    assert "data-run-paused" not in client.get(reverse("run-detail", args=[run.pk])).content.decode()


@pytest.mark.django_db
def test_my_models_and_my_runs_list_a_users_own_things_and_the_model_page_says_whether_a_key_is_stored(
    client, release, author, other_author, django_capture_on_commit_callbacks
):
    mine = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    services.model_register(name="theirs", display_name="Theirs", kind="uploaded", owner=other_author)
    keyed = services.model_register(
        name="keyed", display_name="Keyed", litellm_model="openai/gpt-4o-mini", api_key="sk-mine", owner=author
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = services.run_from_upload(model=mine, version=release, data=reference_answers(release), user=author)
    client.force_login(author)
    nav = client.get("/").content.decode().split("</nav>")[0]
    assert 'href="/models/">My models</a>' in nav and 'href="/runs/">My runs</a>' in nav
    models = client.get(reverse("my-models")).content.decode()
    assert "Uploader" in models and "Keyed" in models and "Theirs" not in models
    runs = client.get(reverse("my-runs")).content.decode()
    assert f'href="/runs/{run.pk}/">#{run.pk}</a>' in runs
    page = client.get(reverse("model-detail", args=[keyed.name])).content.decode()
    key = page[page.index("data-api-key>") :].split("</dd>")[0]
    assert "stored (encrypted, never shown)" in key and "PATCH /api/v1/models/keyed/" in key and "sk-mine" not in page
    client.force_login(other_author)
    theirs = client.get(reverse("model-detail", args=[keyed.name])).content.decode()
    assert "PATCH" not in theirs.split("data-api-key>")[1].split("</dd>")[0]
    assert "Uploader" not in client.get(reverse("my-models")).content.decode()
    assert f"#{run.pk}</a>" not in client.get(reverse("my-runs")).content.decode()
