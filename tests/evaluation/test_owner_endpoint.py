"""A model cannot take the items it cannot solve out of its score by having its own endpoint fail them (issue 33, "a
flag never helps"): a model call that fails at an endpoint the model's owner runs (its api_base) counts as failed,
said as such on the run's and the leaderboard's pages; a failure of a provider the platform configures stays an
unscored error, retried. Real HTTP to the local OpenAI-compatible server, real PostgreSQL, bwrap for the tests."""

from __future__ import annotations

import contextlib
import importlib
import re

import pytest
from django.urls import reverse

from agents.tasks import item_agent
from benchmarks.models import Snippet
from evaluation import llm, services
from evaluation.models import EvaluationRun, Outcome, RunScore
from evaluation.outcomes import OWNER_ENDPOINT_SAID, Verdict, model_call_failed
from evaluation.selectors.item_pages import outcome_replay
from evaluation.selectors.items import run_snippets
from evaluation.tasks import item_generate
from tests.agents.test_agent_errors import (  # noqa: F401 (fixtures)
    Agent,
    items_on_bwrap,
    retried_inline,
    small_release,
)
from tests.evaluation.openai_server import openai_server, platform_provider

pytestmark = pytest.mark.django_db

NAME = re.compile(r'# TODO: Implement block "([^"]+)"')


class Solver:
    """A model that answers the reference on the items in `solved`; on the others it answers the placeholder, or
    (`fails`) its endpoint answers HTTP 500 (the responder raises), every attempt."""

    def __init__(self, solved: dict[str, Snippet], *, fails: bool):
        self.solved, self.fails = solved, fails

    def __call__(self, prompt: str, body: dict) -> str:
        snippet = self.solved.get(NAME.findall(prompt)[0])
        if snippet is not None:
            return f"```python\n{snippet.reference_code}```\n"
        if self.fails:
            raise RuntimeError("the endpoint fails what its model cannot solve")
        return "```python\nraise NotImplementedError\n```\n"


def _run(items: list[Snippet], release, responder, *, at: str, monkeypatch, mode: str = "single"):
    """A run over `items` against the local server, each item's chain inline: the server at the model's api_base
    (`at="owner"`) or as the platform's configured provider (`at="provider"`). Its overall score and requests."""
    with openai_server(responder=responder) as server, contextlib.ExitStack() as provider:
        if at == "provider":
            provider.enter_context(platform_provider(server))
        responder.server = server
        model = services.model_register(
            name=f"solver-{EvaluationRun.objects.count()}",
            display_name="Solver",
            # At the provider, a model litellm's tables know (they say whether it calls tools); at an api_base, any.
            litellm_model="openai/solver" if at == "owner" else "openai/gpt-4o-mini",
            api_base=server.base_url if at == "owner" else "",
            api_key="sk-test",
        )
        budget = {"budget": {"turns": 6}} if mode == "agent" else {}
        run = services.run_start(model=model, version=release, mode=mode, dispatch=False, **budget)
        assert bool(run.api_base) == (at == "owner")
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        for snippet in items:
            (item_agent if mode == "agent" else item_generate).apply(args=(run.pk, snippet.pk, 0))
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.COMPLETED and Outcome.objects.filter(run=run).count() == len(items)
    return run, RunScore.objects.get(run=run, paper=None, split=""), server.chat_requests


@pytest.fixture
def quick_retries(monkeypatch):
    monkeypatch.setattr(llm, "BACKOFF_BASE", 0.01)  # the retries' back-off, short; every retry still made


def test_a_failed_call_is_the_owners_at_its_api_base_and_the_providers_elsewhere():
    class Run:
        calls_owner_endpoint = True

    owner = model_call_failed("openai/m: gave up after 6 attempts: InternalServerError", run=Run())  # type: ignore[arg-type]
    assert (owner.status, owner.category) == ("failed", "owner_endpoint")
    assert owner.detail.startswith(OWNER_ENDPOINT_SAID) and "InternalServerError" in owner.detail
    Run.calls_owner_endpoint = False
    provider = model_call_failed("openai/m: gave up after 6 attempts: InternalServerError", run=Run())  # type: ignore[arg-type]
    assert (provider.status, provider.category) == ("error", "model_call")


@pytest.mark.slow  # four single-shot runs of three items on bwrap
@pytest.mark.usefixtures("quick_retries")
def test_an_endpoint_failing_the_items_its_model_cannot_solve_scores_what_it_solved(
    items_on_bwrap,  # noqa: F811 (a fixture)
    small_release,  # noqa: F811 (a fixture)
    monkeypatch,
    client,
):
    """The honest model solves 1 of 3 items (33.3%). The attacking model solves the same item, and its endpoint
    answers HTTP 500 to the two others, on every retry. With the rule off (a failed call is an unscored error
    wherever it goes, as before) it scores 100%; with it on, those items are failed, 33.3%, the honest score, and
    the pages say its endpoint failed them. The same failures at the platform's provider stay unscored errors."""
    solved = {items_on_bwrap[0].name: items_on_bwrap[0]}
    _, honest, _ = _run(items_on_bwrap, small_release, Solver(solved, fails=False), at="owner", monkeypatch=monkeypatch)
    assert (honest.passed, honest.failed, honest.errors) == (1, 2, 0)
    assert honest.pass_rate == pytest.approx(100 / 3)

    with monkeypatch.context() as off:
        off.setattr(EvaluationRun, "calls_owner_endpoint", property(lambda run: False))
        _, gamed, _ = _run(items_on_bwrap, small_release, Solver(solved, fails=True), at="owner", monkeypatch=off)
    assert (gamed.passed, gamed.failed, gamed.errors) == (1, 0, 2)
    assert gamed.pass_rate == 100.0 and gamed.scaled_pass_rate == 100.0, "the attack works with the rule off"

    run, score, requests = _run(
        items_on_bwrap, small_release, Solver(solved, fails=True), at="owner", monkeypatch=monkeypatch
    )
    assert len(requests) == 1 + 2 * 6, "each failing item was retried as any failed call is (5 retries)"
    assert (score.passed, score.failed, score.errors, score.flagged) == (1, 2, 0, 0)
    assert (score.pass_rate, score.scaled_pass_rate) == (honest.pass_rate, honest.scaled_pass_rate)
    assert (score.pass_rate_ci_low, score.pass_rate_ci_high) == (honest.pass_rate_ci_low, honest.pass_rate_ci_high)
    assert score.categories == {"passed": 1, "owner_endpoint": 2}
    paper = RunScore.objects.get(run=run, paper=items_on_bwrap[0].task.paper, split="")
    assert (paper.passed, paper.failed, paper.errors) == (1, 2, 0), "the per-paper row counts them too"
    failed = list(Outcome.objects.filter(run=run, status="failed").order_by("pk"))
    assert [o.category for o in failed] == ["owner_endpoint"] * 2
    assert all(o.detail.startswith(OWNER_ENDPOINT_SAID) and "InternalServerError" in o.detail for o in failed)

    item = client.get(reverse("run-item", args=[run.pk, failed[0].pk])).content.decode()
    assert "Failed: The model&#x27;s own endpoint failed" in item
    # Why it counts, and no answer to show: no empty output box, no diff deleting the whole reference, no replay.
    assert 'data-testid="owner-endpoint-why"' in item and "(no answer: the model call failed)" in item
    assert "What the test printed" not in item and "<h2>Difference</h2>" not in item
    assert outcome_replay(outcome=failed[0], sealed=True) == "no_answer"
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert page.count("The model&#x27;s own endpoint failed") >= 2
    assert page.count('data-testid="owner-endpoint-why"') == 1, "the run page says why once, beside its progress"
    board = client.get(reverse("leaderboard", args=[small_release.name])).content.decode()
    assert ">2 failed at its own endpoint</span>" in board
    assert board.count("failed at its own endpoint</span>") == 1, "only the attacking run's row says it"

    # A provider the platform configures failing the same items: its outage, retried, then left out of the score.
    run, outage, requests = _run(
        items_on_bwrap, small_release, Solver(solved, fails=True), at="provider", monkeypatch=monkeypatch
    )
    assert len(requests) == 1 + 2 * 6 and {r.headers["Authorization"] for r in requests} == {"Bearer sk-test"}
    assert (outage.passed, outage.failed, outage.errors) == (1, 0, 2)
    assert set(Outcome.objects.filter(run=run, status="error").values_list("category", flat=True)) == {"model_call"}
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Model call failed" in page and "own endpoint failed" not in page
    assert 'data-testid="owner-endpoint-why"' not in page


class FailingAgent(Agent):
    """The scripted agent of test_agent_errors (solves the items in `solved`), whose endpoint answers HTTP 500 on the
    items it fails, from their first turn on."""

    def __call__(self, prompt: str, body: dict) -> dict:
        name = re.search(r'the block "([^"]+)"', body["messages"][0]["content"]).group(1)
        if name not in self.solved:
            raise RuntimeError("the endpoint fails what its agent cannot solve")
        return super().__call__(prompt, body)


@pytest.mark.slow  # two agent runs of three items on bwrap
@pytest.mark.usefixtures("quick_retries")
def test_an_agents_calls_to_its_own_failing_endpoint_count_as_failed(
    items_on_bwrap,  # noqa: F811 (a fixture)
    small_release,  # noqa: F811 (a fixture)
    monkeypatch,
):
    """An agent run's model calls go to the same endpoint: failed there, the item is failed, as a single-shot one;
    at the platform's provider, an unscored error."""
    solved = {items_on_bwrap[0].name: items_on_bwrap[0]}
    agent = FailingAgent(solved, breaks=False)
    run, score, _ = _run(items_on_bwrap, small_release, agent, at="owner", monkeypatch=monkeypatch, mode="agent")
    assert (score.passed, score.failed, score.errors) == (1, 2, 0)
    assert set(Outcome.objects.filter(run=run, status="failed").values_list("category", flat=True)) == {
        "owner_endpoint"
    }
    run, outage, _ = _run(items_on_bwrap, small_release, agent, at="provider", monkeypatch=monkeypatch, mode="agent")
    assert (outage.passed, outage.failed, outage.errors) == (1, 0, 2)


def test_errors_stored_at_an_owners_endpoint_before_the_rule_are_failed_and_their_runs_rescored(
    small_release,  # noqa: F811 (a fixture)
):
    """Outcomes recorded under the old rule (an owner's endpoint's failed call an unscored error, 100%) are made
    failed by the migration, and the run's stored aggregates say 33.3%; a provider's errors stay as they are."""
    from django.apps import apps

    migration = importlib.import_module("evaluation.migrations.0037_outcome_owner_endpoint")
    runs = {}
    for at, api_base in (("owner", "https://models.example.org/v1"), ("provider", "")):
        model = services.model_register(
            name=f"old-{at}", display_name=at, litellm_model="openai/gpt-4o-mini", api_base=api_base, api_key="sk"
        )
        run = runs[at] = services.run_start(model=model, version=small_release, dispatch=False)
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        for index, snippet in enumerate(run_snippets(run=run).order_by("pk")):
            old = Verdict("error", "model_call", "no answer: openai/gpt-4o-mini: InternalServerError")
            services.outcome_record(
                run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", "") if index == 0 else old
            )
        assert services.run_maybe_finish(run=run)
        assert RunScore.objects.get(run=run, paper=None, split="").pass_rate == 100.0

    migration.owner_endpoint_errors_failed(apps, None)
    owner = RunScore.objects.get(run=runs["owner"], paper=None, split="")
    assert (owner.passed, owner.failed, owner.errors, owner.pass_rate) == (1, 2, 0, pytest.approx(100 / 3))
    assert owner.categories == {"passed": 1, "owner_endpoint": 2} and owner.pass_rate_ci_low == 0.0, "was [100, 100]"
    paper = RunScore.objects.get(run=runs["owner"], paper__isnull=False)
    assert (paper.passed, paper.failed, paper.errors) == (1, 2, 0)
    failed = Outcome.objects.filter(run=runs["owner"], status="failed")
    assert {o.detail for o in failed} == {f"{OWNER_ENDPOINT_SAID} (no answer: openai/gpt-4o-mini: InternalServerError)"}
    provider = RunScore.objects.get(run=runs["provider"], paper=None, split="")
    assert (provider.passed, provider.errors, provider.pass_rate) == (1, 2, 100.0)
