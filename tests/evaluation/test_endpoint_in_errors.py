"""A failed call's error at an owner's endpoint never names that endpoint: its api_base is shown to its owner and
maintainers only (benchmarks.visibility.endpoint_visible), while the error becomes the item's outcome detail, the
run's pause reason and an agent's transcript, shown to anyone who may see the run (attack12, finding 1)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from evaluation import pipeline, services
from evaluation.llm import ModelCall, ModelCallError, converse, endpoint_hidden
from evaluation.models import EvaluationRun, Outcome
from evaluation.services.runs import run_snippets
from tests.conftest import client_for

PUBLIC_LITERAL = "https://93.184.216.34:8443/v1"  # checked at the run's start only: no DNS, never connected to
# Stands for a lab's name whose DNS moved to its private range after the run started: `localhost` resolves to
# loopback here, so nothing leaves the machine.
MOVED = "https://localhost:8443/v1"
SECRETS = ("localhost", "127.0.0.1", "::1")


class _Task:  # generate only touches its task to retry, which a refused address never is
    def retry(self, **kw):
        raise AssertionError(f"not retried: {kw}")


def _named(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.mark.django_db
def test_a_refused_endpoint_is_not_named_to_other_visitors_of_the_run(release, author, other_author, client):
    model = services.model_register(
        name="lab-model",
        display_name="Lab",
        litellm_model="openai/lab",
        owner=author,
        api_key="sk-lab-own",
        api_base=PUBLIC_LITERAL,
    )
    run = services.run_start(model=model, version=release, user=author, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(api_base=MOVED)
    items = list(run_snippets(run=run)[: settings.RUN_PAUSE_AFTER_FAILURES])
    assert len(items) == settings.RUN_PAUSE_AFTER_FAILURES
    for snippet in items:
        pipeline.generate(_Task(), run.pk, snippet.pk, 0)

    run.refresh_from_db()
    outcome = Outcome.objects.get(run=run, snippet=items[0], sample=0)
    # Still says what failed and how: the address's kind, not the address.
    said = "openai/lab: not called: the model's endpoint host resolves to a loopback address; refused"
    assert outcome.detail == f"the model's own endpoint failed: counted as not passed (no answer: {said})"
    assert run.status == EvaluationRun.Status.CANCELLED and said in run.pause_reason, run.pause_reason
    assert not _named(outcome.detail) and not _named(run.pause_reason) and not _named(outcome.generation.error)

    other = Client()
    other.force_login(other_author)
    item_url = reverse("run-item", args=[run.pk, outcome.pk])
    for who, pages, api in (("anonymous", client, client_for()), ("another user", other, client_for(other_author))):
        for url in (item_url, reverse("run-detail", args=[run.pk])):
            page = pages.get(url)
            assert page.status_code == 200 and said.replace("'", "&#x27;") in page.content.decode(), (who, url)
            assert not _named(page.content.decode()), (who, url)
        detail = api.get(f"/api/v1/runs/{run.pk}/")
        assert detail.status_code == 200 and said in detail.json()["pause_reason"]
        results = api.get(f"/api/v1/runs/{run.pk}/results/")
        assert results.status_code == 200 and said in results.content.decode()
        assert not _named(detail.content.decode()) and not _named(results.content.decode()), who

    client.force_login(author)
    owners = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f"<code>{MOVED}</code> (the owner's endpoint)" in owners, "its owner still sees where it was called"


def test_an_agents_failed_turn_does_not_name_the_endpoint_either():
    call = ModelCall(model="openai/lab", api_base=MOVED, api_key="sk-lab-own", max_retries=0)
    with pytest.raises(ModelCallError) as failed:
        converse(call, [{"role": "user", "content": "hi"}], tools=[])
    assert (
        str(failed.value) == "openai/lab: not called: the model's endpoint host resolves to a loopback address; refused"
    )


@pytest.mark.parametrize(
    ("error", "hidden"),
    [
        (
            "for api_base https://gpu.lab.example:8443/v1/ litellm would send the platform's openai key instead",
            "for api_base the model's endpoint litellm would send the platform's openai key instead",
        ),
        (
            "APIConnectionError: Cannot connect to host GPU.lab.example:8443 ssl:default [Connect call failed "
            "('10.1.2.3', 8443)]",
            "APIConnectionError: Cannot connect to host the model's endpoint host ssl:default [Connect call failed "
            "('an address', 8443)]",
        ),
        (
            "NotFoundError: 404 at https://gpu.lab.example:8443/v1/chat/completions (fe80::1%eth0)",
            "NotFoundError: 404 at the model's endpoint/chat/completions (an address)",
        ),
        ("Timeout: timed out after 300 s", "Timeout: timed out after 300 s"),
    ],
)
def test_the_endpoint_its_host_and_addresses_are_replaced_and_the_failure_kept(error, hidden):
    assert endpoint_hidden(error, api_base="https://gpu.lab.example:8443/v1/") == hidden


def test_without_an_api_base_only_a_refused_host_of_the_platforms_environment_and_addresses_are_hidden():
    """litellm sends a model without api_base to the environment's OPENAI_BASE_URL, an internal proxy perhaps."""
    refused = "model endpoint host proxy.internal resolves to a private-network address (10.0.0.7); refused"
    hidden = "the model's endpoint host resolves to a private-network address; refused"
    assert endpoint_hidden(refused, api_base=None) == hidden
    unreached = "APIConnectionError: Connection error to https://api.openai.com/v1"
    assert endpoint_hidden(unreached, api_base=None) == unreached, "a provider's own address is no secret"
