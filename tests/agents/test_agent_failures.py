"""What an agent run says about cost and failure (issue 23): a model whose calls fail pauses its agent run under the
single-shot rule, labelled the model's failure, not the platform's; an uploaded agent run's trajectories carry their
tokens and cost into its scores, the leaderboard and the cost chart; a trajectory none of whose calls was priced
costs an unknown amount, never $0. Real workers, Redis, PostgreSQL and bwrap; the model is the local
OpenAI-compatible server."""

from __future__ import annotations

import shutil
import time
from decimal import Decimal

import pytest
from django.urls import reverse

from agents.budget import Budget, Usage
from agents.models import AgentTrajectory
from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, Generation, Outcome, RunScore
from leaderboard.charts import leaderboard_cost_scatter
from leaderboard.selectors.table import leaderboard_rows
from tests.agents.test_agent_turns import Script
from tests.agents.test_agent_uploads import _encode, _rows, _trajectory, _upload
from tests.conftest import DEMO_PSET, polled, sandbox_backend_or_missing
from tests.evaluation.openai_server import openai_server, provider_environment

PAPER = "trimmed-infonce"  # one paper of the demo (10 items) keeps the runs short


@pytest.fixture
def release(media_root, tmp_path, sandbox_cache):
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    pset = tmp_path / "pset"
    shutil.copytree(DEMO_PSET, pset)
    for folder in pset.iterdir():
        if folder.is_dir() and folder.name != PAPER:
            shutil.rmtree(folder)
    papers = (pset / "papers.yaml").read_text()
    (pset / "papers.yaml").write_text(papers[papers.index(f"- id: {PAPER}") :])
    return pset_import(root=pset, version_name="fail-1.0.0", publish=True).version


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_agent_run_whose_key_is_refused_pauses_like_a_single_shot_run_and_resumes(
    release, maintainer, client, celery_worker_factory, settings
):
    """Three 401s in a row pause the run (RUN_PAUSE_AFTER_FAILURES=3): of 10 items, only those in flight were sent
    (3 in flight at most: the 3 failures and at most 2 fed meanwhile), never the rest. The failed items are the
    model's failure ("Model call failed", not "Infrastructure"), their trajectories' cost unknown (no call was
    priced). Before the fix the failed turn was recorded with 0 attempts, which the pause rule does not count:
    every item was asked. Resume, with the endpoint answering, starts the failed items over: all pass."""
    with openai_server(responder=Script(release), failures=[401] * 10) as server:
        model = services.model_register(
            name="scripted",
            display_name="Scripted",
            litellm_model="openai/gpt-4o-mini",  # at the platform's provider (its outage is no owner's failure)
            api_key="sk-wrong-key",
            owner=maintainer,
        )
        settings.AGENT_ITEMS_IN_FLIGHT = 3  # the feed runs here (run_start's dispatch) and in the worker
        worker = celery_worker_factory(
            SANDBOX_BACKEND="bwrap",
            RUN_PAUSE_AFTER_FAILURES="3",
            AGENT_ITEMS_IN_FLIGHT="3",
            **provider_environment(server),
        )
        run = services.run_start(model=model, version=release, mode="agent", budget={"turns": 6}, user=maintainer)
        paused = polled(
            lambda: EvaluationRun.objects.filter(pk=run.pk, status="cancelled").first(),
            timeout=300,
            what="the pause",
            worker=worker,
        )
        time.sleep(3)  # the items still queued reach the worker and are skipped, not sent
        sent = len(server.chat_requests)
        assert 3 <= sent <= 5, f"{sent} model calls: the run did not stop asking"
        assert paused.pause_reason.startswith("API calls are failing: ") and "401" in paused.pause_reason
        assert "sk-wrong-key" not in paused.pause_reason

        # Every call sent failed and is counted; items whose scoring task came after the pause have no outcome yet.
        assert Generation.objects.filter(run=run).exclude(error="").count() == sent
        trajectories = AgentTrajectory.objects.filter(run=run, ended_by="model_error")
        assert trajectories.count() == sent and set(trajectories.values_list("cost", flat=True)) == {None}
        failed = Outcome.objects.filter(run=run)
        assert failed.exists() and set(failed.values_list("status", "category")) == {("error", "model_call")}
        assert all(o.detail.startswith("no answer: openai/gpt-4o-mini: AuthenticationError") for o in failed)

        client.force_login(maintainer)
        page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
        banner = page[page.index("data-run-paused") :].split("</div>")[0]
        assert "API calls are failing:" in banner and "401" in banner and "Resume run" in banner
        assert "Model call failed" in page and "Infrastructure" not in page
        item = client.get(reverse("run-item", args=[run.pk, failed.first().pk])).content.decode()
        assert "Error: Model call failed" in item and "cost unavailable" in item and "$0.00" not in item

        server.failures.clear()
        services.run_resume(run=run)
        polled(
            lambda: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=300,
            what="the resumed run",
            worker=worker,
        )
    outcomes = Outcome.objects.filter(run=run)
    assert outcomes.count() == 10 and set(outcomes.values_list("status", flat=True)) == {"passed"}
    assert not Generation.objects.filter(run=run).exclude(error="").exists()
    assert set(AgentTrajectory.objects.filter(run=run).values_list("ended_by", flat=True)) == {"submitted"}


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_uploaded_agent_runs_trajectories_carry_their_tokens_and_cost_to_its_scores_and_the_leaderboard(
    release, author, celery_worker_factory
):
    """Each item's trajectory used 128 tokens and $0.0012 (one turn): the run's scores count 1280 tokens and
    $0.012, the leaderboard's cost column says it and the chart plots it, self-reported. A run with one item
    without a trajectory has an unknown cost (that item's is), as before; its tokens count the items that said."""
    services.model_register(name="byo-agent", display_name="BYO agent", kind="uploaded", owner=author)
    services.model_register(name="byo-partial", display_name="BYO partial", kind="uploaded", owner=author)
    celery_worker_factory(queues="default,sandbox", SANDBOX_BACKEND="bwrap")
    every = [{**row, "trajectory": _trajectory()} for row in _rows(release)]
    partial = [{**row, "trajectory": _trajectory()} for row in _rows(release)]
    del partial[0]["trajectory"]
    runs = []
    for name, rows in (("byo-agent", every), ("byo-partial", partial)):
        response = _upload(author, release, _encode(rows), model=name)
        assert response.status_code == 201, response.content[:500]
        runs.append(EvaluationRun.objects.get(pk=response.json()["id"]))
    for run in runs:
        polled(
            lambda run=run: EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.COMPLETED,
            timeout=600,
            what="the uploaded run to be scored",
        )
    whole, part = runs
    overall = RunScore.objects.get(run=whole, paper__isnull=True, split="")
    assert (overall.prompt_tokens, overall.completion_tokens, overall.cost) == (1200, 80, Decimal("0.012"))
    assert RunScore.objects.get(run=part, paper__isnull=True, split="").cost is None
    missing = Generation.objects.get(run=part, snippet_id=int(partial[0]["id"]))
    assert (missing.prompt_tokens, missing.cost) == (None, None), "no trajectory: usage unknown"

    rows = {row.run.pk: row for row in leaderboard_rows(version=release)}
    assert rows[whole.pk].run.provenance == EvaluationRun.Provenance.SELF_REPORTED
    assert rows[whole.pk].cost == Decimal("0.012") and rows[whole.pk].cost_per_item == Decimal("0.0012")
    assert rows[part.pk].cost is None
    plotted = {point.row.run.pk for point in leaderboard_cost_scatter(rows=list(rows.values()))["points"]}
    assert whole.pk in plotted and part.pk not in plotted


def test_no_priced_call_is_an_unknown_cost_and_a_known_zero_stays_zero():
    budget = Budget(turns=5, tokens=1000, seconds=60, cost=1.0)
    unused = Usage()
    assert unused.cost is None, "no model call priced yet: unknown, never $0"
    assert unused.left(budget)["cost"] == 1.0 and unused.exhausted(budget) == "", "the whole budget is left"
    free = Usage()
    free.add_turn(prompt_tokens=0, completion_tokens=0, cost=0.0)  # a scripted agent: priced, at zero
    assert free.cost == Decimal(0) and free.left(budget)["cost"] == 1.0
    priced = Usage()
    priced.add_turn(prompt_tokens=10, completion_tokens=2, cost=0.25)
    priced.add_turn(prompt_tokens=10, completion_tokens=2, cost=0.5)
    assert priced.cost == Decimal("0.75") and priced.left(budget)["cost"] == 0.25
    priced.add_turn(prompt_tokens=10, completion_tokens=2, cost=None)  # one unpriced turn makes the total unknown
    priced.add_turn(prompt_tokens=10, completion_tokens=2, cost=0.1)
    assert priced.cost is None and priced.left(budget)["cost"] is None
