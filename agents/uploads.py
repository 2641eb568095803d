"""Bring your own agent: an upload of mode `agent` gives per item the final snippet body (`code`) and, optionally, the
agent's trajectory in the documented schema (docs/AGENT_RUNS.md), checked strictly before anything is stored.

The line is an ordinary upload line (services.upload_line_parse) plus `trajectory`. A trajectory is held to what the
live loop could have stored: its step count within what the release's turn maximum allows, its text under
AGENT_TRAJECTORY_BYTES, every field of the documented type and the model's column sizes, NUL bytes and lone
surrogates made U+FFFD as the loop does. It cannot name a run (the upload makes its own) nor an item other than its
line's: a held-out item is as unknown inside a trajectory as on the line.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from functools import partial

from django.conf import settings

from agents.budget import BUDGETS, UNITS, Budget, release_maximums
from agents.models import AgentStep, AgentTrajectory
from agents.selectors import TRAJECTORY_FORMAT
from common.text import storable

# What an uploaded agent may say ended it: it gave an answer, so never a failed model call, an error or "running".
UPLOAD_ENDS = (
    AgentTrajectory.End.SUBMITTED,
    AgentTrajectory.End.TURNS,
    AgentTrajectory.End.TOKENS,
    AgentTrajectory.End.SECONDS,
    AgentTrajectory.End.COST,
    AgentTrajectory.End.STORAGE,
    AgentTrajectory.End.CONTEXT,
    AgentTrajectory.End.DISK,
)
# "uploaded" is the platform's to say (ignored): a downloaded trajectory uploads as it is, less its "run".
TRAJECTORY_KEYS = {
    "format",
    "uploaded",
    "run",
    "snippet",
    "sample",
    "budget",
    "ended_by",
    "usage",
    "answer_problem",
    "steps",
}
USAGE_KEYS = {"turns", "prompt_tokens", "completion_tokens", "cost", "seconds"}
STEP_KEYS = {
    "index",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "duration",
    "budget_left",
    "created_at",
}
CALL_KEYS = {"id", "name", "arguments"}
# The columns' sizes (AgentStep, AgentTrajectory): a value past them is refused here, never cut by the database.
STEP_TOKENS_MAX = 2**31 - 1
TOTAL_TOKENS_MAX = 10**15
COST_MAX = 10**6  # DecimalField(max_digits=12, decimal_places=6)
SECONDS_MAX = 10**7
# A live item's wall seconds are read on one host's clock, its steps' durations on another's.
SECONDS_SKEW = 1.0
# A trajectory's usage columns (AgentTrajectory): turns a PositiveIntegerField, tokens big integers, cost as above.
USAGE_MAX = {
    "turns": STEP_TOKENS_MAX,
    "prompt_tokens": TOTAL_TOKENS_MAX,
    "completion_tokens": TOTAL_TOKENS_MAX,
    "cost": COST_MAX - Decimal("0.000001"),
    "seconds": SECONDS_MAX,
}
CALL_ID_CHARS = 200
TOOL_NAME_CHARS = 50


class Bad(Exception):
    """What is wrong with one field of a trajectory, named by its path."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")


def max_steps(version) -> int:
    """The most steps a live item of the release could store: system and prompt, then per turn the model's message,
    a tool step per call it runs and the budget note."""
    return 2 + release_maximums(version).turns * (2 + settings.AGENT_TOOL_CALLS_PER_TURN)


def upload_line_parser(*, version, parse):
    """The function that parses one line of an agent upload, around `parse` (services.upload_line_parse), and is
    called as it is."""
    return partial(agent_line_parse, parse=parse, steps_max=max_steps(version), maximums=release_maximums(version))


def agent_line_parse(row, *, parse, snippets: dict, version, protocol: str, steps_max: int, maximums: Budget):
    """An agent upload's line: the usual line with `code`, and its trajectory checked (None when it gives none)."""
    if not isinstance(row, dict):
        return 'expected an object with "id", "sample", "code" and optionally "trajectory"'
    if "answer" in row:
        return 'an agent upload gives the final snippet body as "code", not a raw "answer"'
    rest = {key: value for key, value in row.items() if key != "trajectory"}
    parsed = parse(rest, snippets=snippets, version=version, protocol=protocol)
    if isinstance(parsed, str) or "trajectory" not in row:
        return parsed
    try:
        trajectory = trajectory_check(
            row["trajectory"], item=str(parsed.snippet.pk), sample=parsed.sample, maximums=maximums
        )
        steps = trajectory["steps"]
        if len(steps) > steps_max:
            raise Bad(
                "trajectory.steps",
                f"{len(steps)} steps; at most {steps_max} (what the release's turn maximum lets a live item store)",
            )
    except Bad as exc:
        return str(exc)
    return replace(parsed, trajectory=trajectory)


def _same_int(value, expected: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == expected


def _int(value, path: str, *, most: int, null: bool = False) -> int | None:
    if value is None and null:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise Bad(path, f"must be an integer from 0 to {most}{' or null' if null else ''}")
    return value


def _number(value, path: str, *, most: float, least: float | None = 0.0, null: bool = False) -> float | None:
    if value is None and null:
        return None
    low = -most if least is None else least
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= most
    ):
        raise Bad(path, f"must be a finite number from {low:g} to {most:g}{' or null' if null else ''}")
    return float(value)


def _text(value, path: str, *, most: int | None = None) -> str:
    if not isinstance(value, str):
        raise Bad(path, f"must be a string, not {type(value).__name__}")
    if most is not None and len(value) > most:
        raise Bad(path, f"is {len(value)} characters; at most {most}")
    return storable(value)


def _object(value, path: str, keys: set[str]) -> dict:
    if not isinstance(value, dict):
        raise Bad(path, f"must be an object, not {type(value).__name__}")
    if unknown := sorted(set(value) - keys):
        raise Bad(path, f"unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    return value


def _budget(value, path: str, *, left: bool) -> dict:
    _object(value, path, set(BUDGETS))
    # What was left may go below zero (the last command's overrun) and its cost is null once a price was unknown.
    return {
        name: _number(value[name], f"{path}.{name}", most=TOTAL_TOKENS_MAX, least=None if left else 0.0, null=left)
        if name in ("seconds", "cost")
        else _int_signed(value[name], f"{path}.{name}", left=left)
        for name in BUDGETS
        if name in value
    }


def _int_signed(value, path: str, *, left: bool) -> int:
    wrong = isinstance(value, bool) or not isinstance(value, int)
    if wrong or abs(value) > TOTAL_TOKENS_MAX or (value < 0 and not left):
        raise Bad(path, f"must be an integer{'' if left else ' from 0'} of at most {TOTAL_TOKENS_MAX}")
    return value


def _call(value, path: str) -> dict:
    _object(value, path, CALL_KEYS)
    if missing := sorted(CALL_KEYS - set(value)):
        raise Bad(path, f"missing {', '.join(missing)}")
    return {
        "id": _text(value["id"], f"{path}.id", most=CALL_ID_CHARS),
        "name": _text(value["name"], f"{path}.name", most=TOOL_NAME_CHARS),
        "arguments": _text(value["arguments"], f"{path}.arguments"),
    }


def _step(value, path: str, index: int) -> dict:
    _object(value, path, STEP_KEYS)
    if "index" in value and not _same_int(value["index"], index):
        raise Bad(f"{path}.index", f"must be {index}, the step's place in the list")
    role = value.get("role")
    if role not in AgentStep.Role.values:
        raise Bad(f"{path}.role", f"must be one of {', '.join(AgentStep.Role.values)}")
    calls = value.get("tool_calls", [])
    if not isinstance(calls, list):
        raise Bad(f"{path}.tool_calls", f"must be a list, not {type(calls).__name__}")
    if calls and role != AgentStep.Role.ASSISTANT:
        raise Bad(f"{path}.tool_calls", "only an assistant step makes tool calls")
    if len(calls) > settings.AGENT_TOOL_CALLS_PER_TURN:
        raise Bad(f"{path}.tool_calls", f"{len(calls)} calls; at most {settings.AGENT_TOOL_CALLS_PER_TURN} per turn")
    for field in ("tool_call_id", "tool_name"):
        if value.get(field) and role != AgentStep.Role.TOOL:
            raise Bad(f"{path}.{field}", "only a tool step answers a call")
    if "created_at" in value:
        _text(value["created_at"], f"{path}.created_at", most=64)  # not stored: the step is stored at the upload
    cost = _number(value.get("cost"), f"{path}.cost", most=COST_MAX - 1, null=True)
    return {
        "index": index,
        "role": role,
        "content": _text(value.get("content", ""), f"{path}.content"),
        "tool_calls": [_call(call, f"{path}.tool_calls[{n}]") for n, call in enumerate(calls)],
        "tool_call_id": _text(value.get("tool_call_id", ""), f"{path}.tool_call_id", most=CALL_ID_CHARS),
        "tool_name": _text(value.get("tool_name", ""), f"{path}.tool_name", most=TOOL_NAME_CHARS),
        "prompt_tokens": _int(value.get("prompt_tokens"), f"{path}.prompt_tokens", most=STEP_TOKENS_MAX, null=True),
        "completion_tokens": _int(
            value.get("completion_tokens"), f"{path}.completion_tokens", most=STEP_TOKENS_MAX, null=True
        ),
        "cost": None if cost is None else Decimal(str(cost)).quantize(Decimal("0.000001")),
        "duration": _number(value.get("duration"), f"{path}.duration", most=SECONDS_MAX, null=True),
        "budget_left": _budget(value.get("budget_left", {}), f"{path}.budget_left", left=True),
    }


def _step_bytes(step: dict) -> int:
    """As the loop counts a step against AGENT_TRAJECTORY_BYTES: its text and its calls."""
    import json

    return len(step["content"].encode("utf-8")) + len(json.dumps(step["tool_calls"]))


def _usage_summed(steps: list[dict], ended_by: str) -> dict:
    """The usage the steps add up to, as the live loop counts it (turns: the assistant steps; cost unknown if any
    turn's is; seconds: the steps' durations, which the wall time of a live item covers)."""
    turns = [step for step in steps if step["role"] == AgentStep.Role.ASSISTANT]
    last = turns[-1] if turns and turns[-1] is steps[-1] else None
    if ended_by == AgentTrajectory.End.SECONDS and last and not last["tool_calls"] and _reports_nothing(last):
        turns.pop()  # a model call the wall-time budget cut short: stored as the last step, but no turn came back
    costs = [step["cost"] for step in turns]
    return {
        "turns": len(turns),
        "prompt_tokens": sum(step["prompt_tokens"] or 0 for step in turns),
        "completion_tokens": sum(step["completion_tokens"] or 0 for step in turns),
        "cost": None if None in costs else sum(costs, Decimal(0)),
        "seconds": round(sum(step["duration"] or 0.0 for step in steps), 3),
    }


def _reports_nothing(step: dict) -> bool:
    return all(step[name] is None for name in ("prompt_tokens", "completion_tokens", "cost"))


def _usage_disagreement(given: dict, summed: dict) -> tuple[str, str] | None:
    """The first field of a given usage the steps contradict, and how; None when it is what they add up to.

    A live item's cost is the sum of its turns' costs before each step's was rounded to the micro-dollar, and its
    seconds the wall time, which covers the steps' durations (up to the hosts' clock skew)."""
    for name in ("turns", "prompt_tokens", "completion_tokens"):
        if given[name] != summed[name]:
            return name, f"is {given[name]}; the steps' assistant turns make {summed[name]}"
    unknown = (given["cost"] is None, summed["cost"] is None)
    rounding = Decimal("0.000001") * max(1, summed["turns"])
    if unknown[0] != unknown[1] or (not any(unknown) and abs(given["cost"] - summed["cost"]) > rounding):
        shown = "unknown (null)" if summed["cost"] is None else f"{summed['cost']:f}"
        said = "unknown (null)" if given["cost"] is None else f"{given['cost']:f}"
        return "cost", f"is {said}; the steps' assistant turns make {shown}"
    if given["seconds"] < summed["seconds"] - SECONDS_SKEW:
        return "seconds", f"is {given['seconds']:g}; less than the steps' durations, {summed['seconds']:g}"
    return None


def _usage(value, steps: list[dict], *, ended_by: str) -> dict:
    """The usage stored: summed from the steps when none is given, else the given one, which must be what its steps
    add up to (a trajectory without steps has nothing to contradict it)."""
    summed = _usage_summed(steps, ended_by)
    if value is None:
        # Each step within its column can still add up past the trajectory's: 2 steps of 999999 USD.
        for name, most in USAGE_MAX.items():
            if summed[name] is not None and summed[name] > most:
                raise Bad(
                    "trajectory.steps", f"their {name} add up to {summed[name]}; a trajectory's is at most {most}"
                )
        return summed
    _object(value, "trajectory.usage", USAGE_KEYS)
    cost = _number(value.get("cost"), "trajectory.usage.cost", most=COST_MAX - 1, null=True)
    given = {
        "turns": _int(value.get("turns", 0), "trajectory.usage.turns", most=STEP_TOKENS_MAX),
        "prompt_tokens": _int(value.get("prompt_tokens", 0), "trajectory.usage.prompt_tokens", most=TOTAL_TOKENS_MAX),
        "completion_tokens": _int(
            value.get("completion_tokens", 0), "trajectory.usage.completion_tokens", most=TOTAL_TOKENS_MAX
        ),
        "cost": None if cost is None else Decimal(str(cost)).quantize(Decimal("0.000001")),
        "seconds": _number(value.get("seconds", 0.0), "trajectory.usage.seconds", most=SECONDS_MAX),
    }
    if steps and (wrong := _usage_disagreement(given, summed)):
        raise Bad(f"trajectory.usage.{wrong[0]}", f"{wrong[1]} (leave usage out to have it summed)")
    return given


def _budget_allowed(budget: dict, maximums: Budget) -> dict:
    """The budget an upload says it had, within what its release lets any item have (release_maximums)."""
    for name, value in budget.items():
        if value > (most := getattr(maximums, name)):
            raise Bad(
                f"trajectory.budget.{name}",
                f"{value:g} is above the release's maximum of {most:g} {UNITS[name]} per item",
            )
    return budget


def trajectory_check(value, *, item: str, sample: int, maximums: Budget) -> dict:
    """The trajectory of an upload line as it will be stored, or Bad naming the first wrong field."""
    _object(value, "trajectory", TRAJECTORY_KEYS)
    if value.get("format") != TRAJECTORY_FORMAT:
        raise Bad("trajectory.format", f"must be {TRAJECTORY_FORMAT!r}")
    if value.get("run") is not None:
        raise Bad("trajectory.run", "an upload makes a run of its own: leave run out (or null)")
    # One answer for any other item, held-out or not: the trajectory learns nothing the line could not.
    snippet = value.get("snippet", item)
    if isinstance(snippet, (bool, list, dict)) or str(snippet) != item:
        raise Bad("trajectory.snippet", "must be the line's id (or left out)")
    if "sample" in value and not _same_int(value["sample"], sample):
        raise Bad("trajectory.sample", "must be the line's sample (or left out)")
    if value.get("answer_problem", "") != "":
        raise Bad("trajectory.answer_problem", 'must be empty: the answer is the line\'s "code"')
    ended_by = value.get("ended_by", AgentTrajectory.End.SUBMITTED)
    if ended_by not in UPLOAD_ENDS:
        raise Bad("trajectory.ended_by", f"must be one of {', '.join(UPLOAD_ENDS)}")
    steps = value.get("steps")
    if not isinstance(steps, list):
        raise Bad("trajectory.steps", "must be a list of steps")
    checked, size = [], 0
    for index, step in enumerate(steps):
        checked.append(_step(step, f"trajectory.steps[{index}]", index))
        size += _step_bytes(checked[-1])
        if size > settings.AGENT_TRAJECTORY_BYTES:
            raise Bad(
                "trajectory.steps",
                f"over {settings.AGENT_TRAJECTORY_BYTES} bytes of text by step {index} "
                "(AGENT_TRAJECTORY_BYTES, the cap of a live trajectory)",
            )
    return {
        "budget": _budget_allowed(_budget(value.get("budget", {}), "trajectory.budget", left=False), maximums),
        "ended_by": ended_by,
        "usage": _usage(value.get("usage"), checked, ended_by=ended_by),
        "steps": checked,
    }


STEP_BATCH = 1000


def trajectories_store(*, run, rows) -> int:
    """Store the checked trajectories of an agent upload's answers (rows: services.UploadedAnswer); how many."""
    given = [row for row in rows if row.trajectory is not None]
    trajectories = AgentTrajectory.objects.bulk_create(
        [
            AgentTrajectory(
                run=run,
                snippet=row.snippet,
                sample=row.sample,
                budget=row.trajectory["budget"],
                ended_by=row.trajectory["ended_by"],
                **row.trajectory["usage"],
            )
            for row in given
        ]
    )
    AgentStep.objects.bulk_create(
        (
            AgentStep(trajectory=trajectory, **step)
            for trajectory, row in zip(trajectories, given, strict=True)
            for step in row.trajectory["steps"]
        ),
        batch_size=STEP_BATCH,
    )
    return len(trajectories)


# What ended an agent item, as a clause ("... after 3 turns"): for the outcome detail of an uploaded item.
ENDED_SAID: dict[str, str] = {
    AgentTrajectory.End.RUNNING: "it was still running",
    AgentTrajectory.End.SUBMITTED: "the agent submitted",
    AgentTrajectory.End.TURNS: "its turn budget ran out",
    AgentTrajectory.End.TOKENS: "its token budget ran out",
    AgentTrajectory.End.SECONDS: "its wall-time budget ran out",
    AgentTrajectory.End.COST: "its cost budget ran out",
    AgentTrajectory.End.MODEL_ERROR: "the model call failed",
    AgentTrajectory.End.STORAGE: "its trajectory reached its size cap",
    AgentTrajectory.End.CONTEXT: "its conversation outgrew what the model accepts",
    AgentTrajectory.End.DISK: "its workspace went over its disk limit",
    AgentTrajectory.End.ERROR: "the item failed",
}


def uploaded_ended_text(trajectory: AgentTrajectory | None) -> str:
    """The start of an uploaded agent item's outcome detail: self-reported, and what the uploader says ended it."""
    if trajectory is None:
        return "an uploaded agent answer without a trajectory (self-reported)"
    turns = f"{trajectory.turns:,} turn{'' if trajectory.turns == 1 else 's'}"
    return (
        f"an uploaded agent answer (self-reported: {ENDED_SAID.get(trajectory.ended_by, trajectory.ended_by)} "
        f"after {turns})"
    )
