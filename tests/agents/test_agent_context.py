"""An agent cannot take the items it fails out of its score by overflowing its model's context (issue 33, "a flag never
raises a score"): a model call refused for what the conversation holds (past the context window, too large, against
the provider's policy) after the agent's own turns ends the item as a budget does, scored on its workspace as it
stands; on the first turn (the platform's prompt alone) it is an unscored error, as a single-shot item's over-long
prompt is; a provider's outage (5xx, a dropped connection) stays the provider's: retried, then an unscored error.
Real HTTP to the local OpenAI-compatible server, real PostgreSQL, bwrap for the agents' commands."""

from __future__ import annotations

import dataclasses
import re
import socket

import pytest

from agents import policies
from agents.budget import Usage
from agents.loop import outgrown
from agents.models import AgentStep, AgentTrajectory
from benchmarks.models import Snippet
from evaluation import llm
from evaluation.llm import ModelCall, ModelCallError, converse
from evaluation.models import Generation, Outcome
from tests.agents.test_agent_errors import (  # noqa: F401 (fixtures)
    Agent,
    _call,
    agent_run_inline,
    items_on_bwrap,
    retried_inline,
    small_release,
)
from tests.evaluation.openai_server import messages_tokens, openai_server

pytestmark = pytest.mark.django_db

WINDOW = 12_000  # the emulated model's context window, in the server's tokens (words)
# One command's output, cut at the fixture's 8 KiB: 4,096 words; six in one turn take the conversation past WINDOW.
FLOOD = "yes w | head -c 100000 | tr '\\n' ' '"


# Which failures are the request's


def _refused(failures: list, *, base_url: str | None = None) -> ModelCallError:
    with openai_server(failures=failures) as server:
        call = ModelCall(
            model="openai/m",
            api_base=base_url or server.base_url,
            api_key="sk-t",
            private_addresses=True,
            max_retries=2,
        )
        with pytest.raises(ModelCallError) as refused:
            converse(call, [{"role": "user", "content": "hi"}], tools=[], sleep=lambda _: None)
    return refused.value


def test_a_refusal_for_what_the_request_holds_is_told_from_a_provider_outage():
    """OpenAI's `context_length_exceeded` (HTTP 400) and a 413 are the request's, not retried: the same messages fail
    again. A 503, a dropped connection, a server that is down and a refused key are not the request's."""
    for failures in (["context"], [413]):
        error = _refused(failures)
        assert (error.request_caused, error.retryable, error.attempts) == (True, False, 1), failures
    context = _refused(["context"])
    assert "ContextWindowExceededError" in str(context) and context.status_code == 400
    for failures in ([503] * 3, ["close"] * 3):
        error = _refused(failures)
        assert (error.request_caused, error.retryable, error.attempts) == (False, True, 3), failures
    with socket.socket() as closed:  # a port nothing listens on: the provider is down
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    error = _refused([], base_url=down)
    assert (error.request_caused, error.attempts) == (False, 3)
    assert _refused([401]).request_caused is False


def test_the_server_answers_a_request_past_its_window_as_openai_does():
    """The emulation the attack test relies on: under the window an answer, over it OpenAI's 400."""
    with openai_server(context_tokens=5) as server:
        call = ModelCall(model="openai/m", api_base=server.base_url, api_key="sk-t", private_addresses=True)
        converse(call, [{"role": "user", "content": "one two three"}], tools=[])
        with pytest.raises(ModelCallError) as refused:
            converse(call, [{"role": "user", "content": "one two three four five six"}], tools=[])
    assert refused.value.request_caused and "maximum context length is 5 tokens" in str(refused.value)
    assert [messages_tokens(r.body) for r in server.chat_requests] == [3, 6]


# Through real agent items


class Overflowing(Agent):
    """The scripted agent of test_agent_errors (solves the items in `solved`, reads then edits in the reference), which
    on the items it fails floods its conversation with six commands' output in its first turn: its next call is
    refused for the context window."""

    def __call__(self, prompt: str, body: dict) -> dict:
        messages = body["messages"]
        name = re.search(r'the block "([^"]+)"', messages[0]["content"]).group(1)
        if name not in self.solved and not any(m["role"] == "assistant" for m in messages):
            return {"content": "", "tool_calls": [_call(i, "run", command=FLOOD) for i in range(6)]}
        return super().__call__(prompt, body)


class Outage(Agent):
    """The honest agent whose provider fails once it has run a command on the items it fails: `failures` are served
    from its second call on (each retried as a provider's failure is)."""

    def __init__(self, solved: dict[str, Snippet], outages: list[list]):
        super().__init__(solved, breaks=False)
        self.outages, self.server = outages, None

    def __call__(self, prompt: str, body: dict) -> dict:
        answer = super().__call__(prompt, body)
        name = re.search(r'the block "([^"]+)"', body["messages"][0]["content"]).group(1)
        if name not in self.solved and self.outages:
            self.server.failures.extend(self.outages.pop(0))
        return answer


@pytest.mark.slow  # three agent runs on bwrap
def test_an_agent_that_overflows_its_context_on_the_items_it_fails_scores_its_honest_score(
    items_on_bwrap,  # noqa: F811 (a fixture)
    small_release,  # noqa: F811 (a fixture)
    monkeypatch,
):
    """The honest agent solves 1 of 3 items (33.3%), its every request within the window. The overflowing agent
    solves the same item and floods its context on the two it fails: its next call is refused. With the rule off (a
    refusal for the context is a provider's failure, left out, as before) it scores 100%; with it on, those items end
    by the context window, scored as they stand (the placeholder: not passed): 33.3%, the honest score."""
    solved = {items_on_bwrap[0].name: items_on_bwrap[0]}
    _, honest, requests = agent_run_inline(
        items_on_bwrap, small_release, Agent(solved, breaks=False), context_tokens=WINDOW
    )
    assert (honest.passed, honest.failed, honest.errors, honest.flagged) == (1, 2, 0, 0)
    assert honest.pass_rate == pytest.approx(100 / 3)
    assert all(r.failure is None and messages_tokens(r.body) <= WINDOW for r in requests)

    with monkeypatch.context() as off:
        # Both rules off: the refusal is not the request's, and no failure after the first turn is probed (the probe
        # would find the provider up and count the item against the agent as well).
        off.setattr(llm, "caused_by_request", lambda exc, status: False)
        off.setattr(policies, "provider_answers", lambda *args, **kwargs: None)
        run, gamed, _ = agent_run_inline(
            items_on_bwrap, small_release, Overflowing(solved, breaks=False), context_tokens=WINDOW
        )
    assert (gamed.passed, gamed.failed, gamed.errors, gamed.flagged) == (1, 0, 2, 0)
    assert gamed.pass_rate == 100.0 and gamed.scaled_pass_rate == 100.0, "the attack works with the rule off"
    assert set(Outcome.objects.filter(run=run, status="error").values_list("category", flat=True)) == {"model_call"}

    run, held, requests = agent_run_inline(
        items_on_bwrap, small_release, Overflowing(solved, breaks=False), context_tokens=WINDOW
    )
    assert (held.passed, held.failed, held.errors, held.flagged) == (1, 2, 0, 0)
    assert (held.pass_rate, held.scaled_pass_rate) == (honest.pass_rate, honest.scaled_pass_rate)
    refused = [r for r in requests if messages_tokens(r.body) > WINDOW]
    assert len(refused) == 2, "one refused call per failed item, never retried"
    ends = dict(AgentTrajectory.objects.filter(run=run).values_list("snippet__name", "ended_by"))
    assert ends == {
        items_on_bwrap[0].name: "submitted",
        items_on_bwrap[1].name: "context",
        items_on_bwrap[2].name: "context",
    }
    for outcome in Outcome.objects.filter(run=run, status="failed"):
        assert outcome.detail.startswith("the conversation outgrew what the model accepts;"), outcome.detail
        steps = AgentStep.objects.filter(trajectory__run=run, trajectory__snippet=outcome.snippet)
        assert steps.filter(role="tool").count() == 6, "the flood's commands ran"
        assert "context length" in steps.order_by("-index").first().content
    assert not Generation.objects.filter(run=run).exclude(error="").exists(), "no failed call for the pause rule"


def test_a_prompt_past_the_window_on_the_first_turn_is_an_unscored_error_as_a_single_shot_items(
    small_release,  # noqa: F811 (a fixture)
    retried_inline,  # noqa: F811 (a fixture)
    settings,
    tmp_path,
):
    """Before any turn of the model the conversation is the platform's system prompt and the item's prompt: a window
    too small for them is the model's limit, as for a single-shot item, never the agent's doing (no sandbox runs)."""
    settings.AGENT_WORKSPACE_DIR = tmp_path / "workspaces"
    items = list(Snippet.objects.filter(task__versions=small_release).order_by("pk")[:3])
    run, score, requests = agent_run_inline(items, small_release, Agent({}, breaks=False), context_tokens=10)
    assert (score.passed, score.failed, score.errors, score.flagged) == (0, 0, 3, 0)
    assert len(requests) == 3 and all(messages_tokens(r.body) > 10 for r in requests)
    outcomes = Outcome.objects.filter(run=run)
    assert {(o.status, o.category) for o in outcomes} == {("error", "model_call")}
    assert set(AgentTrajectory.objects.filter(run=run).values_list("ended_by", flat=True)) == {"model_error"}


@pytest.mark.slow  # an agent run on bwrap
def test_a_provider_outage_after_the_agent_acted_is_still_not_counted_against_the_model(
    items_on_bwrap,  # noqa: F811 (a fixture)
    small_release,  # noqa: F811 (a fixture)
    monkeypatch,
):
    """The agent solves the first item and runs a command on the other two; then its provider answers 503 on one and
    drops the connection on the other, on every retry and on the probe with the item's first prompt alone: both items
    are unscored errors of the model call (neither held nor failed), 1 of 1 scored passed."""
    monkeypatch.setattr(llm, "BACKOFF_BASE", 0.01)  # the retries' back-off, short
    retries = ModelCall(model="openai/m").max_retries  # a run's calls take the default
    solved = {items_on_bwrap[0].name: items_on_bwrap[0]}
    outages = [[503] * (retries + 2), ["close"] * (retries + 2)]  # every attempt, then the probe
    run, score, requests = agent_run_inline(items_on_bwrap, small_release, Outage(solved, outages))
    assert (score.passed, score.failed, score.errors, score.flagged) == (1, 0, 2, 0)
    assert score.pass_rate == 100.0
    errors = Outcome.objects.filter(run=run, status="error").order_by("snippet_id")
    assert [(o.category, o.error_after_agent) for o in errors] == [("model_call", False)] * 2
    assert "ServiceUnavailableError" in errors[0].detail
    assert all(f"gave up after {retries + 1} attempts" in o.detail for o in errors), "every outage was retried"
    assert sum(r.failure is not None for r in requests) == 2 * (retries + 2)
    for outcome in errors:
        steps = AgentStep.objects.filter(trajectory__run=run, trajectory__snippet=outcome.snippet, role="tool")
        assert list(steps.values_list("tool_name", flat=True)) == ["run"], "the agent acted before the outage"


# A provider's timeout on a conversation the agent made long (issue 33's leftovers)


def _quick_calls(monkeypatch) -> None:
    """A run's model calls give up on an attempt after 0.5 s and retry once (its defaults: 300 s, five retries)."""
    from evaluation import services

    real = services.model_call
    monkeypatch.setattr(
        services, "model_call", lambda *, run: dataclasses.replace(real(run=run), timeout=0.5, max_retries=1)
    )
    monkeypatch.setattr(llm, "BACKOFF_BASE", 0.01)


SYSTEM = [{"role": "system", "content": "you implement a block"}, {"role": "user", "content": "the item's prompt"}]
GROWN = [*SYSTEM, {"role": "assistant", "content": "reading"}, {"role": "user", "content": "word " * 50}]


def _timed_out(messages: list[dict], *, slow_tokens: int) -> tuple[ModelCallError, list]:
    llm_backoff = llm.BACKOFF_BASE
    llm.BACKOFF_BASE = 0.01
    try:
        return _timed_out_once(messages, slow_tokens=slow_tokens)
    finally:
        llm.BACKOFF_BASE = llm_backoff


def _timed_out_once(messages: list[dict], *, slow_tokens: int) -> tuple[ModelCallError, list]:
    with openai_server(slow_tokens=slow_tokens, timeout_seconds=1.0) as server:
        call = ModelCall(
            model="openai/m", api_base=server.base_url, api_key="sk-t", private_addresses=True, timeout=0.3
        )
        turn = policies.model_policy(dataclasses.replace(call, max_retries=1))
        with pytest.raises(ModelCallError) as failed:
            turn(messages, 60.0)
    return failed.value, server.chat_requests


def test_a_timeout_on_a_conversation_the_agent_grew_is_its_own_when_the_provider_answers_the_items_prompt():
    """Every attempt on the grown conversation times out; a probe with the item's first prompt alone (what the
    provider answered on the first turn) is answered at once: the conversation's size is the cause, the agent's
    doing (request_caused, told as a timeout). On the first turn, or when the probe times out too (the provider is
    slow on everything), it stays an outage."""
    grown, requests = _timed_out(GROWN, slow_tokens=20)
    assert grown.request_caused and not grown.retryable, grown
    assert "timed out on the conversation as it stands" in str(grown) and "Timeout" in str(grown)
    assert [len(r.body["messages"]) for r in requests] == [4, 4, 2], "two attempts, then the probe"
    assert requests[-1].body["messages"] == SYSTEM

    first, requests = _timed_out([{**SYSTEM[0], "content": "word " * 50}, SYSTEM[1]], slow_tokens=20)
    assert (first.request_caused, first.retryable, len(requests)) == (False, True, 2), "no probe on the first turn"

    outage, requests = _timed_out(GROWN, slow_tokens=0)
    assert (outage.request_caused, outage.retryable, len(requests)) == (False, True, 3), "the probe timed out too"


@pytest.mark.slow  # two agent runs on bwrap
@pytest.mark.parametrize(
    ("server", "failed", "said"),
    [
        ({"slow_tokens": WINDOW, "timeout_seconds": 1.5}, "Timeout", "timed out on"),
        ({"large_tokens": WINDOW, "large_failure": 429}, "tokens per min", "failed on"),  # attack7's TPM 429
    ],
    ids=["timeout", "tpm-429"],
)
def test_an_agent_that_slows_its_provider_past_the_timeout_on_the_items_it_fails_scores_its_honest_score(
    items_on_bwrap,  # noqa: F811 (a fixture)
    small_release,  # noqa: F811 (a fixture)
    monkeypatch,
    server,
    failed,
    said,
):
    """The overflowing agent again, with a provider that accepts any context but answers a conversation past WINDOW
    only after the call's timeout: its next call times out on every attempt on the two items it fails. With the rule
    off (a timeout is the provider's outage, as before) those items are unscored errors and it scores 100%; with it
    on, the provider answered the item's first prompt at once, so the items end as their context's, scored as they
    stand: 33.3%, the honest score. So too with a provider that answers such a conversation with a 429 no retry lifts
    (a tokens-per-minute limit the request alone exceeds; attack7: it was an unscored error, 100%)."""
    _quick_calls(monkeypatch)
    solved = {items_on_bwrap[0].name: items_on_bwrap[0]}

    with monkeypatch.context() as off:
        off.setattr(policies, "provider_answers", lambda *args, **kwargs: None)
        run, gamed, _ = agent_run_inline(items_on_bwrap, small_release, Overflowing(solved, breaks=False), **server)
    assert (gamed.passed, gamed.failed, gamed.errors, gamed.flagged) == (1, 0, 2, 0)
    assert gamed.pass_rate == 100.0 and gamed.scaled_pass_rate == 100.0, "the attack works with the rule off"
    errors = Outcome.objects.filter(run=run, status="error")
    assert {(o.category, failed in o.detail) for o in errors} == {("model_call", True)}

    run, held, requests = agent_run_inline(items_on_bwrap, small_release, Overflowing(solved, breaks=False), **server)
    assert (held.passed, held.failed, held.errors, held.flagged) == (1, 2, 0, 0)
    assert held.pass_rate == pytest.approx(100 / 3)
    assert sum(messages_tokens(r.body) > WINDOW for r in requests) == 2 * 2, "each failed item's call, retried once"
    ends = dict(AgentTrajectory.objects.filter(run=run).values_list("snippet__name", "ended_by"))
    assert list(ends.values()).count("context") == 2 and ends[items_on_bwrap[0].name] == "submitted"
    for outcome in Outcome.objects.filter(run=run, status="failed"):
        assert outcome.detail.startswith("the conversation outgrew what the model accepts;"), outcome.detail
        last = AgentStep.objects.filter(trajectory__run=run, trajectory__snippet=outcome.snippet).order_by("-index")
        assert f"the provider {said} the conversation as it stands" in last.first().content
    assert not Generation.objects.filter(run=run).exclude(error="").exists(), "no failed call for the pause rule"


def _failed(messages: list[dict], *, params: dict | None = None, **server_options) -> tuple[ModelCallError, list]:
    """The turn's failure through the policy (real HTTP, two attempts, a short back-off), and the server's requests."""
    with openai_server(timeout_seconds=1.0, **server_options) as server:
        call = ModelCall(
            model="openai/m",
            api_base=server.base_url,
            api_key="sk-t",
            private_addresses=True,
            timeout=0.3,
            max_retries=1,
            params=params or {},
        )
        with pytest.raises(ModelCallError) as failed:
            policies.model_policy(call)(messages, 60.0)
    return failed.value, server.chat_requests


@pytest.mark.parametrize("failure", [429, 502, 524, "close"])
def test_any_failure_on_a_conversation_the_agent_grew_is_its_own_when_the_provider_answers_the_items_prompt(
    failure, monkeypatch
):
    """Not only a timeout: a 429 the grown conversation alone causes (a tokens-per-minute limit no retry lifts), a
    502, a 524, a dropped connection on every attempt, while the item's first prompt alone is answered at once: the
    item ends as its context's, scored as it stands (attack7: they were unscored model errors, so an agent could take
    the items it fails out of its score). On the first turn, or when the probe fails too, it stays an outage."""
    monkeypatch.setattr(llm, "BACKOFF_BASE", 0.01)
    after_first = Usage()
    after_first.turns = 1

    grown, requests = _failed(GROWN, large_tokens=20, large_failure=failure)
    assert grown.request_caused and grown.first_prompt_answered and not grown.retryable, grown
    assert "failed on the conversation as it stands (2 attempts)" in str(grown), grown
    assert [len(r.body["messages"]) for r in requests] == [4, 4, 2], "two attempts, then the probe"
    assert outgrown(grown, after_first)

    long_first = [{**SYSTEM[0], "content": "word " * 50}, SYSTEM[1]]
    first, requests = _failed(long_first, large_tokens=20, large_failure=failure)
    assert (first.request_caused, first.retryable, len(requests)) == (False, True, 2), "no probe on the first turn"

    outage, requests = _failed(GROWN, large_tokens=0, large_failure=failure)
    assert (outage.request_caused, outage.retryable, len(requests)) == (False, True, 3), "the probe failed too"
    assert not outgrown(outage, after_first)


def test_the_probe_is_the_first_turns_own_request_so_a_reasoning_models_provider_accepts_it(monkeypatch):
    """A model registered with `reasoning_effort` and a `max_tokens` above its thinking budget: its first turn is
    answered; a later call times out on the grown conversation. The probe went with `max_tokens: 1`, which the
    provider refuses beside a thinking budget (Anthropic's rule, emulated): the timeout stayed an outage, for every
    such model (attack7). It is now the first turn's request again, parameters unchanged, and is answered."""
    monkeypatch.setattr(llm, "BACKOFF_BASE", 0.01)
    params = {"reasoning_effort": "medium", "max_tokens": 4000, "temperature": 1}
    with openai_server(thinking_budget=2048, slow_tokens=20, timeout_seconds=1.0) as server:
        call = ModelCall(
            model="openai/m",
            api_base=server.base_url,
            api_key="sk-t",
            private_addresses=True,
            timeout=0.3,
            max_retries=1,
            params=params,
        )
        turn = policies.model_policy(call)
        turn(SYSTEM, 60.0)
        with pytest.raises(ModelCallError) as failed:
            turn(GROWN, 60.0)
    first, *_, probe = server.chat_requests
    assert failed.value.request_caused and failed.value.timed_out, failed.value
    assert "timed out on the conversation as it stands" in str(failed.value)
    assert first.body["reasoning_effort"] == "medium" and first.body["messages"] == probe.body["messages"] == SYSTEM
    assert {k: v for k, v in probe.body.items() if k != "messages"} == {
        k: v for k, v in first.body.items() if k != "messages"
    }
