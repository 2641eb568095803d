"""Who decides an agent's next turn: the run's model through litellm tool calling, or a calibration script.

The calibration agents are the built-in `reference` and `placeholder` models run in agent mode: the first reads the
masked file, writes the reference body with the edit tool, runs one command and submits (it must score 100%); the
second submits without changing anything (0%). They take the same loop, tools and scoring path as a model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from agents.tools import SUBMIT, TOOLS
from evaluation.item_files import MaskedFile
from evaluation.llm import ModelCall, ToolTurn, converse

Policy = Callable[[list[dict], float], ToolTurn]  # (messages so far, seconds left) -> the next turn


def model_policy(call: ModelCall) -> Policy:
    def turn(messages: list[dict], seconds_left: float) -> ToolTurn:
        # No attempt or retry back-off of the call goes past the item's wall-time budget.
        return converse(
            call, messages, tools=TOOLS, timeout=max(1.0, seconds_left), deadline=time.monotonic() + seconds_left
        )

    return turn


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
