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
    """Seconds the provider took to answer `messages` (one output token, one attempt, within `timeout`), or None
    when it did not."""
    params = {k: v for k, v in call.params.items() if k != "max_completion_tokens"}
    probe = dataclasses.replace(call, params={**params, "max_tokens": 1}, max_retries=0)
    try:
        return converse(probe, messages, tools=TOOLS, timeout=timeout).latency
    except ModelCallError:
        return None


def conversation_slowed(
    call: ModelCall, messages: list[dict], exc: ModelCallError, *, timeout: float, deadline: float
) -> ModelCallError:
    """The turn's failure as the loop should take it. Every attempt timed out on a conversation the agent's own turns
    and tool output have grown (after its first turn), while the provider, asked once more with the item's first
    prompt alone (what it answered on the first turn), answers within the same timeout: the provider is up, and
    the conversation's size made it too slow to answer. That is the agent's doing, as a refusal past the context
    window is (`request_caused`: agents.loop.outgrown ends the item, scored as it stands); left an outage, an agent
    could take the items it fails out of its score by reading a large file until its calls time out. A timeout on
    the first turn, one whose probe times out too, and every other failure stay the provider's (`exc` unchanged)."""
    first = list(itertools.takewhile(lambda m: m.get("role") != "assistant", messages))
    left = deadline - time.monotonic()
    if not exc.timed_out or exc.deadline_passed or len(first) == len(messages) or left <= 0:
        return exc
    latency = provider_answers(call, first, timeout=min(timeout, left))
    if latency is None:
        return exc
    return ModelCallError(
        f"{call.model}: timed out on the conversation as it stands ({exc.attempts} attempts of {timeout:g} s), yet "
        f"answered the item's first prompt alone in {latency:.1f} s: {exc}",
        retryable=False,
        status_code=exc.status_code,
        attempts=exc.attempts,
        request_caused=True,
        timed_out=True,
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
