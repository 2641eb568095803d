"""Who decides an agent's next turn: the run's model through litellm tool calling, or a calibration script.

The calibration agents are the built-in `reference` and `placeholder` models run in agent mode: the first reads the
masked file, writes the reference body with the edit tool, runs one command and submits (it must score 100%); the
second submits without changing anything (0%). They take the same loop, tools and scoring path as a model.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable

from agents.tools import SUBMIT, TOOLS
from evaluation.item_files import MaskedFile
from evaluation.llm import ModelCall, ModelCallError, ToolTurn, converse

Policy = Callable[[list[dict], float], ToolTurn]  # (messages so far, seconds left) -> the next turn


def model_policy(call: ModelCall) -> Policy:
    def turn(messages: list[dict], seconds_left: float) -> ToolTurn:
        # No attempt or retry back-off of the call goes past the item's wall-time budget.
        deadline = time.monotonic() + seconds_left
        timeout = min(call.timeout, max(1.0, seconds_left))
        try:
            return converse(call, messages, tools=TOOLS, timeout=timeout, deadline=deadline)
        except ModelCallError as exc:
            raise conversation_slowed(call, messages, exc, timeout=timeout, deadline=deadline) from None

    return turn


def provider_answers(call: ModelCall, messages: list[dict], *, timeout: float) -> float | None:
    """Seconds the provider took to answer `messages` (one attempt, within `timeout`), or None when it did not. The
    request is the call's own, parameters and tools unchanged: with `messages` the item's first prompt, it is the one
    the provider answered on the item's first turn, so no parameter of the model's can make it refused (a cap of one
    output token was: beside `reasoning_effort`, Anthropic refuses a `max_tokens` not above the thinking budget)."""
    probe = dataclasses.replace(call, max_retries=0)
    try:
        return converse(probe, messages, tools=TOOLS, timeout=timeout).latency
    except ModelCallError:
        return None


def conversation_slowed(
    call: ModelCall, messages: list[dict], exc: ModelCallError, *, timeout: float, deadline: float
) -> ModelCallError:
    """The turn's failure as the loop should take it. A call on a conversation the agent's own turns and tool output
    have grown (after its first turn) failed, whatever the failure (every attempt timed out, a rate limit no retry
    lifted, such as a tokens-per-minute limit the conversation alone exceeds, a 5xx, a dropped connection, a request
    litellm or the provider would not take), while the provider, asked once more with the item's first prompt alone
    (the request it answered on the first turn), answers it: the provider is up, and what the conversation holds made
    it fail. That is the agent's doing, as a refusal past the context window is (`request_caused`:
    agents.loop.outgrown ends the item, scored as it stands); left an outage, an agent could take the items it fails
    out of its score by growing its conversation until its calls fail. A failure on the first turn, one whose probe
    fails too (an outage, a rate limit the probe hits as well), one past the item's deadline and a refusal already
    the request's stay as they are (`exc` unchanged)."""
    first = list(itertools.takewhile(lambda m: m.get("role") != "assistant", messages))
    left = deadline - time.monotonic()
    if exc.request_caused or exc.deadline_passed or len(first) == len(messages) or left <= 0:
        return exc
    latency = provider_answers(call, first, timeout=min(timeout, left))
    if latency is None:
        return exc
    how = "timed out" if exc.timed_out else "failed"
    tries = f"{exc.attempts} attempts of {timeout:g} s" if exc.timed_out else f"{exc.attempts} attempts"
    return ModelCallError(
        f"{call.model}: {how} on the conversation as it stands ({tries}), yet answered the item's first prompt alone "
        f"in {latency:.1f} s: {exc}",
        retryable=False,
        status_code=exc.status_code,
        attempts=exc.attempts,
        request_caused=True,
        timed_out=exc.timed_out,
        first_prompt_answered=True,
    )


def _scripted(message_for: Callable[[int], dict]) -> Policy:
    def turn(messages: list[dict], seconds_left: float) -> ToolTurn:
        done = sum(1 for m in messages if m["role"] == "assistant")
        return ToolTurn(
            message=message_for(done), prompt_tokens=0, completion_tokens=0, latency=0.0, cost=0.0, attempts=0
        )

    return turn


def _call(number: int, name: str, **arguments: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def reference_policy(*, masked: MaskedFile, reference_code: str) -> Policy:
    script = [
        lambda: _call(0, "read_file", path=masked.path),
        lambda: _call(1, "edit_file", path=masked.path, old_string=masked.placeholder, new_string=reference_code),
        lambda: _call(
            2, "run", command=f"python -c \"import ast; ast.parse(open('{masked.path}').read())\" && echo parsed"
        ),
        lambda: _call(3, SUBMIT),
    ]
    return _scripted(lambda done: script[min(done, len(script) - 1)]())


def placeholder_policy() -> Policy:
    return _scripted(lambda done: _call(done, SUBMIT))
