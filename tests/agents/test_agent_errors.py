"""An agent cannot make the items it fails into infrastructure errors (issue 33, "a flag never raises a score"): an
agent item's infrastructure error once its agent ran a command or edited a file counts as not passed, held for a
maintainer's review, who may set it aside as the platform's error. Errors before the agent acted stay out of the
score, as every infrastructure error did before."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from agents.budget import Budget
from agents.loop import agent_acted, trajectory_start
from agents.models import AgentStep
from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.outcomes import ERROR_AFTER_AGENT, ERROR_AFTER_AGENT_SAID, Verdict, agent_error_held
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing
from tests.evaluation.openai_server import openai_server, platform_provider

pytestmark = pytest.mark.django_db

SANDBOX_ERROR = Verdict("error", "infrastructure", "sandbox failure: the bwrap sandbox did not start (exit 125)")


# The rule


def test_an_infrastructure_error_after_the_agent_acted_is_held_as_not_passed():
    held = agent_error_held(SANDBOX_ERROR, agent_acted=True)
    assert (held.status, held.category, held.measured) == ("flagged", "infrastructure", "error")
    assert held.detail == f"{ERROR_AFTER_AGENT_SAID} ({SANDBOX_ERROR.detail})"
    assert [f["kind"] for f in held.findings] == [ERROR_AFTER_AGENT]
    assert agent_error_held(SANDBOX_ERROR, agent_acted=False) == SANDBOX_ERROR, "before the agent acted: as before"
    model_call = Verdict("error", "model_call", "no answer: the provider is down")
    assert agent_error_held(model_call, agent_acted=True) == model_call, "the model's provider: as before"
    failed = Verdict("failed", "wrong_result", "the tests' assertions failed")
    assert agent_error_held(failed, agent_acted=True) == failed


def _agent_run(release, *, name: str = "breaker") -> EvaluationRun:
    model = ModelEntry.objects.create(
        name=name, display_name=name.title(), litellm_model=f"openai/{name}", api_base="http://127.0.0.1:9/v1"
    )
    run = services.run_start(model=model, version=release, mode="agent", dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    return EvaluationRun.objects.get(pk=run.pk)


def _overall(run) -> RunScore:
    return RunScore.objects.get(run=run, paper=None, split="")


def test_scores_count_an_agents_errors_as_not_passed_until_a_maintainer_sets_them_aside(release, maintainer, client):
    """Of the demo's 33 items the agent passes 30 and breaks its sandbox on 3. Recorded as errors before the agent
    acted they leave the score (30 of 30); after it acted they count as not passed (30 of 33) until reviewed: set
    aside, an item leaves the score; counted, it stays failed. The run, item and leaderboard pages say so."""
    snippets = list(Snippet.objects.filter(task__versions=release).order_by("pk"))
    runs = {}
    for acted in (False, True):
        run = runs[acted] = _agent_run(release, name=f"breaker-{str(acted).lower()}")
        for index, snippet in enumerate(snippets):
            verdict = SANDBOX_ERROR if index < 3 else Verdict("passed", "", "")
            services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, agent_acted=acted)
        assert services.run_maybe_finish(run=run)
    before = _overall(runs[False])
    assert (before.items, before.passed, before.errors, before.flagged, before.pass_rate) == (33, 30, 3, 0, 100.0)
    run = runs[True]
    held = _overall(run)
    assert (held.items, held.passed, held.failed, held.errors, held.flagged) == (33, 30, 0, 0, 3)
    assert held.pass_rate == pytest.approx(100 * 30 / 33) and held.scaled_pass_rate < 100.0
    assert held.categories["flagged"] == 3

    outcomes = list(Outcome.objects.filter(run=run, status="flagged").order_by("pk"))
    assert all(o.error_after_agent and o.detail.startswith(ERROR_AFTER_AGENT_SAID) for o in outcomes)
    item = client.get(reverse("run-item", args=[run.pk, outcomes[0].pk])).content.decode()
    assert ERROR_AFTER_AGENT_SAID.replace("'", "&#x27;") in item and "did not start" in item
    board = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert ">3 awaiting review</span>" in board and "infrastructure errors after an agent&#x27;s commands" in board
    client.force_login(maintainer)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert page.count('value="cleared">Set aside: the platform\'s error, not scored</button>') == 3
    assert "Confirm: tampering" not in page and "(an infrastructure error after the agent&#x27;s commands)" in page

    services.outcome_review(outcome=outcomes[0], reviewer=maintainer, decision="cleared", reason="engine restart")
    outcomes[0].refresh_from_db()
    assert (outcomes[0].status, outcomes[0].category) == ("error", "infrastructure")
    score = _overall(run)
    assert (score.errors, score.flagged, score.pass_rate) == (1, 2, pytest.approx(100 * 30 / 32))
    services.outcome_review(outcome=outcomes[1], reviewer=maintainer, decision="confirmed")
    outcomes[1].refresh_from_db()
    assert (outcomes[1].status, outcomes[1].category) == ("failed", "infrastructure"), "counted, not called tampering"
    score = _overall(run)
    assert (score.failed, score.flagged, score.pass_rate) == (1, 1, pytest.approx(100 * 30 / 32))
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    reviews = re.findall(r'data-testid="flag-review">([^<]*)<', page)
    assert [r.split(" on ")[0] for r in reviews] == [
        "Set aside: the platform&#x27;s error, not scored by maya",
        "Counted: the agent&#x27;s doing, not passed by maya",
    ]
    assert reviews[0].endswith(": engine restart")


def test_the_agent_acted_once_a_turn_asked_to_run_a_command_or_change_a_file(release):
    """Reading and listing change nothing; a turn's writing calls count as soon as they are stored (before they run:
    its first call can break its second); a refused (malformed) turn ran nothing; an upload's agent ran elsewhere."""
    run = _agent_run(release)
    snippet = Snippet.objects.filter(task__versions=release).order_by("pk").first()
    trajectory = trajectory_start(run=run, snippet=snippet, sample=0, budget=Budget(5, 1000, 60, 1))

    def turn(index: int, calls: list[dict]) -> None:
        AgentStep.objects.create(trajectory=trajectory, index=index, role="assistant", tool_calls=calls)

    turn(0, [{"id": "a", "name": "read_file", "arguments": "{}"}, {"id": "b", "name": "list_files", "arguments": "{}"}])
    turn(1, [{"malformed": "[{'function': {'name': 'run'}}]"}])
    assert not agent_acted(run=run, snippet=snippet, sample=0)
    turn(2, [{"id": "c", "name": "read_file", "arguments": "{}"}, {"id": "d", "name": "run", "arguments": "{}"}])
    assert agent_acted(run=run, snippet=snippet, sample=0)
    assert not agent_acted(run=run, snippet=snippet, sample=1), "another sample's trajectory"
    EvaluationRun.objects.filter(pk=run.pk).update(params={**run.params, "uploaded": True})
    assert not agent_acted(run=EvaluationRun.objects.get(pk=run.pk), snippet=snippet, sample=0)


# The attack, through real agent items on bwrap


def _call(number: int, name: str, **arguments) -> dict:
    return {"id": f"c{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


# 400 files stamped in 2099 with long names: tar's warning for each one on the copy-in of the next command (when
# they are not dropped) pushes the start line past an 8 KiB output cap, and the sandbox "did not start".
STAMP = 'n=$(printf "x%.0s" $(seq 60)); for i in $(seq 400); do touch -d 2099-01-01 "f$i-$n"; done'


class Agent:
    """The scripted agent: it solves the items in `solved` (read, edit in the reference, submit) and fails the
    others, honestly (a command, then submit the placeholder) or by breaking its sandbox (`breaks`: files stamped in
    the future, then a second command in the same turn)."""

    def __init__(self, solved: dict[str, Snippet], *, breaks: bool):
        self.solved, self.breaks = solved, breaks

    def __call__(self, prompt: str, body: dict) -> dict:
        messages = body["messages"]
        name = re.search(r'the block "([^"]+)"', messages[0]["content"]).group(1)
        turn = sum(1 for m in messages if m["role"] == "assistant")
        snippet = self.solved.get(name)
        if snippet is None and turn == 0:
            calls = [_call(0, "run", command=STAMP), _call(1, "run", command="ls | wc -l")] if self.breaks else []
            return {"content": "", "tool_calls": calls or [_call(0, "run", command="ls | wc -l")]}
        if snippet is None or turn >= 2:
            return {"content": "", "tool_calls": [_call(9, "submit")]}
        if turn == 0:
            return {"content": "", "tool_calls": [_call(0, "read_file", path=snippet.file_path)]}
        text = next(m["content"] for m in messages if m["role"] == "tool")
        start = text.rfind("\n", 0, text.index(f'# TODO: Implement block "{snippet.name}"')) + 1
        end = text.index("line(s) of code.", start) + len("line(s) of code.\n")
        edit = {"path": snippet.file_path, "old_string": text[start:end], "new_string": snippet.reference_code}
        return {"content": "", "tool_calls": [_call(1, "edit_file", **edit)]}


@pytest.fixture
def small_release(media_root):
    """The demo's first task with three of its items (the rest retired), so a run's feed has no other item."""
    from benchmarks.services.curation import snippet_retire, version_task_remove
    from benchmarks.services.psets import pset_import
    from benchmarks.services.publishing import version_publish

    draft = pset_import(root=DEMO_PSET, version_name="errors-1.0.0").version
    kept, *others = draft.tasks.order_by("pk")
    for task in others:
        version_task_remove(version=draft, task=task)
    for snippet in Snippet.objects.filter(task=kept).order_by("pk")[3:]:
        snippet_retire(version=draft, snippet=snippet, reason="three items keep the test short")
    return version_publish(version=draft, downloads_inline=True)


@pytest.fixture
def retried_inline():
    """An item's chain of tasks run in this process at once, a sandbox failure retried as a worker retries it (an
    eager task's Retry propagated would end the task that queued it instead)."""
    from config.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, False
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@pytest.fixture
def items_on_bwrap(small_release, sandbox_cache, settings, tmp_path, retried_inline):
    """The small release's three items on bwrap, each item's chain run inline; a command's output cut at 8 KiB."""
    from evaluation import executor

    sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.SANDBOX_BACKEND, settings.SANDBOX_CACHE_DIR = "bwrap", sandbox_cache
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    settings.AGENT_OUTPUT_BYTES, settings.AGENT_COMMAND_SECONDS = 8192, 5.0
    executor.sessions_close()
    executor.backend_use(None)
    task = small_release.tasks.get()
    yield list(Snippet.objects.filter(task=task).select_related("task").order_by("pk")[:3])
    executor.sessions_close()
    executor.backend_use(None)


@pytest.fixture
def bwrap_items(items_on_bwrap, monkeypatch):
    """Those items with the copy-in's dropped tar warnings (the fix of the stamped files' wedge) reopened, standing
    for any way an agent may yet find to break its own sandbox."""
    from sandbox import bwrap

    wedged = bwrap.START.replace(" -f - 2>/dev/null && printf", " -f - && printf")
    assert wedged != bwrap.START, "the unguarded copy-in differs from the guarded one"
    monkeypatch.setattr(bwrap, "COMMAND", bwrap.COMMAND.replace(bwrap.START, wedged))
    return items_on_bwrap


def agent_run_inline(
    items: list[Snippet], release, responder, **server_options
) -> tuple[EvaluationRun, RunScore, list]:
    """An agent run over `items` against the local server as the platform's provider (its outages are the
    provider's, not an owner's endpoint's), each item's whole chain inline; its stored overall score and the server's
    chat requests."""
    from agents.tasks import item_agent

    with openai_server(responder=responder, **server_options) as server, platform_provider(server):
        responder.server = server
        model = services.model_register(
            name=f"agent-{EvaluationRun.objects.count()}",
            display_name="Agent",
            litellm_model="openai/gpt-4o-mini",  # at the provider's address: a model litellm knows to call tools
            api_key="sk-test",
        )
        run = services.run_start(model=model, version=release, mode="agent", budget={"turns": 6}, dispatch=False)
        EvaluationRun.objects.filter(pk=run.pk).update(status="running")
        for snippet in items:
            item_agent.apply(args=(run.pk, snippet.pk, 0))
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.COMPLETED and Outcome.objects.filter(run=run).count() == len(items)
    return run, _overall(run), server.chat_requests


def _agent_score(items: list[Snippet], release, *, breaks: bool) -> tuple[EvaluationRun, RunScore]:
    """An agent run over `items` (the first solved); its stored overall score."""
    run, score, _ = agent_run_inline(items, release, Agent({items[0].name: items[0]}, breaks=breaks))
    return run, score


@pytest.mark.slow  # three agent runs on bwrap, each wedged item retried as a worker retries it
def test_an_agent_that_breaks_its_sandbox_on_the_items_it_fails_scores_its_honest_score(
    bwrap_items, small_release, monkeypatch
):
    """The honest agent solves 1 of 3 items (33.3%). The breaking agent solves the same item and, on the two it
    fails, stamps files in the future and runs a second command in the same turn: the sandbox does not start, the
    item is retried and ends as an infrastructure error. With the rule off (every error left out, as before) it
    scores 100%; with it on, its errors count as not passed, held for review: 33.3%, the honest score."""
    from evaluation.services import recording

    _, honest = _agent_score(bwrap_items, small_release, breaks=False)
    assert (honest.passed, honest.failed, honest.errors, honest.flagged) == (1, 2, 0, 0)
    assert honest.pass_rate == pytest.approx(100 / 3)

    with monkeypatch.context() as off:
        off.setattr(recording, "agent_error_held", lambda verdict, **_: verdict)
        _, gamed = _agent_score(bwrap_items, small_release, breaks=True)
    assert (gamed.passed, gamed.failed, gamed.errors, gamed.flagged) == (1, 0, 2, 0)
    assert gamed.pass_rate == 100.0 and gamed.scaled_pass_rate == 100.0, "the attack works with the rule off"

    run, held = _agent_score(bwrap_items, small_release, breaks=True)
    assert (held.passed, held.failed, held.errors, held.flagged) == (1, 0, 0, 2)
    assert (held.pass_rate, held.scaled_pass_rate) == (honest.pass_rate, honest.scaled_pass_rate)
    for outcome in Outcome.objects.filter(run=run, status="flagged"):
        assert outcome.error_after_agent and "did not start" in outcome.detail, outcome.detail
        assert outcome.detail.startswith(ERROR_AFTER_AGENT_SAID)
        steps = AgentStep.objects.filter(trajectory__run=run, trajectory__snippet=outcome.snippet)
        assert not steps.filter(role="tool").exists(), "no command's output was stored: the turn's calls count"
