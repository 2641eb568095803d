"""The agent loop: turns of the policy and its tool calls until it submits or a budget runs out; every message is
stored as a step the moment it exists (a lost worker leaves the trajectory up to its last step).

Budgets: before each turn the loop stops if any is spent. A turn that takes the tokens or cost past the budget ends
the item before its tool calls run; the last allowed turn's tool calls run. A command never runs past the wall-time
budget (its time limit is what is left) and everything a command started dies with it, so when the loop ends no
process of the agent is left; the item is then scored on the workspace as it stands.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from evaluation.agents.budget import Budget, Usage, left_text
from evaluation.agents.models import AgentStep, AgentTrajectory
from evaluation.agents.policies import Policy
from evaluation.agents.tools import SUBMIT, WRITING_TOOLS, tool_call
from evaluation.agents.workspace import Workspace
from evaluation.llm import ModelCallError
from evaluation.sandbox import Limits, Session

SYSTEM_PROMPT = """\
You are implementing one block of code from a research paper's repository, working in a sandbox.

The repository is in your workspace, /sandbox (the paper's text, if given, is there too). In `{path}` the block \
"{name}" is replaced by two placeholder lines starting `# TODO: Implement block "{name}"`. Replace those two lines \
with the block's code (about {loc} line(s), at the placeholder's indentation) using the file tools, then call \
`submit`. Your answer is what stands between the lines before and after the placeholder when you submit (or when a \
budget runs out): do not change any other line of `{path}`, or no answer can be read from it. Changes to other files \
are yours to test with, but they do not reach the grader's tests, which are not in the workspace.

Tools: `run` runs a shell command in /sandbox with the task's Python environment and no network, killed after \
{command_seconds:.0f} s, each output stream cut at {output_bytes} bytes; every process it started ends with it. \
`read_file`, `write_file`, `edit_file` (replace one exact occurrence), `list_files`, `submit`.

Your budget for this item: {turns} turns (model calls), {tokens} tokens in and out, {seconds:.0f} s of wall time, \
{cost}. After each turn you are told what is left.\
"""


def system_prompt(*, path: str, name: str, loc: int, budget: Budget, command_seconds: float, output_bytes: int) -> str:
    return SYSTEM_PROMPT.format(
        path=path,
        name=name,
        loc=loc,
        turns=budget.turns,
        tokens=budget.tokens,
        seconds=budget.seconds,
        cost=f"{budget.cost:g} USD",
        command_seconds=command_seconds,
        output_bytes=output_bytes,
    )


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """Text PostgreSQL and UTF-8 accept: NUL and lone surrogates (from a command's output, a file or the endpoint)
    become U+FFFD, as the model then reads them too."""
    return _UNSTORABLE.sub("\ufffd", text)


def _calls_malformed(calls) -> str:
    """Why the turn's tool calls cannot be carried out ("" if they can): each needs a string id, name and
    arguments."""
    if not isinstance(calls, list):
        return f"tool_calls is a {type(calls).__name__}, not a list"
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(function, dict)
            and isinstance(call.get("id"), str)
            and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments"), str)
        ):
            return f"{storable(repr(call))[:300]} lacks a string id, function.name or function.arguments"
    return ""


@dataclass(frozen=True)
class AgentEnd:
    ended_by: str  # AgentTrajectory.End
    usage: Usage
    error: str = ""  # the model call's failure (ended_by model_error)


class _Steps:
    def __init__(self, trajectory: AgentTrajectory):
        self.trajectory = trajectory
        self.index = 0
        self.bytes = 0  # the stored steps' text, held under AGENT_TRAJECTORY_BYTES

    @property
    def full(self) -> bool:
        return self.bytes >= settings.AGENT_TRAJECTORY_BYTES

    def record(self, *, role: str, content: str = "", usage: Usage, budget: Budget, **fields) -> AgentStep:
        step = AgentStep.objects.create(
            trajectory=self.trajectory,
            index=self.index,
            role=role,
            content=(content := storable(content)),
            budget_left=usage.left(budget),
            **fields,
        )
        self.index += 1
        self.bytes += len(content.encode("utf-8")) + len(json.dumps(fields.get("tool_calls") or []))
        return step


def _usage_save(trajectory: AgentTrajectory, usage: Usage, ended_by: str = "") -> None:
    AgentTrajectory.objects.filter(pk=trajectory.pk).update(
        turns=usage.turns,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=usage.cost,
        seconds=round(usage.seconds, 3),
        ended_by=ended_by,
    )


def agent_loop(
    *,
    trajectory: AgentTrajectory,
    policy: Policy,
    system: str,
    prompt: str,
    workspace: Workspace,
    session: Session,
    limits: Limits,
    budget: Budget,
    clock=time.monotonic,
) -> AgentEnd:
    started = clock()
    usage = Usage()
    steps = _Steps(trajectory)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    for message in messages:
        steps.record(role=message["role"], content=message["content"], usage=usage, budget=budget)

    def tick() -> float:
        usage.seconds = clock() - started
        return budget.seconds - usage.seconds

    while True:
        tick()
        if ended := usage.exhausted(budget):
            break
        if steps.full:
            ended = AgentTrajectory.End.STORAGE
            break
        try:
            turn = policy(messages, budget.seconds - usage.seconds)
        except ModelCallError as exc:
            if exc.deadline_passed or tick() <= 0:  # the budget ran out waiting on the model: scored as it stands
                tick()
                steps.record(
                    role=AgentStep.Role.ASSISTANT,
                    content=f"[the wall-time budget ran out during the model call: {exc}]",
                    usage=usage,
                    budget=budget,
                )
                ended = AgentTrajectory.End.SECONDS
                break
            tick()
            steps.record(
                role=AgentStep.Role.ASSISTANT, content=f"[the model call failed: {exc}]", usage=usage, budget=budget
            )
            _usage_save(trajectory, usage, AgentTrajectory.End.MODEL_ERROR)
            return AgentEnd(AgentTrajectory.End.MODEL_ERROR, usage, str(exc))
        usage.add_turn(prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens, cost=turn.cost)
        tick()
        content = turn.message.get("content")
        content = storable(content) if isinstance(content, str) else ""
        calls = turn.message.get("tool_calls") or []
        malformed = _calls_malformed(calls)
        if malformed:  # refused: the turn is kept as text only, and the model is told why nothing ran
            messages.append({"role": "assistant", "content": content})
            stored_calls = [{"malformed": storable(repr(calls))[:2000]}]
            calls = []
        else:
            calls = [
                {
                    **c,
                    "function": {
                        "name": storable(c["function"]["name"]),
                        "arguments": storable(c["function"]["arguments"]),
                    },
                }
                for c in calls
            ]
            said: dict[str, Any] = {**turn.message, "content": content}
            if calls:
                said["tool_calls"] = calls
            messages.append(said)
            stored_calls = [
                {"id": storable(c["id"]), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                for c in calls
            ]
        steps.record(
            role=AgentStep.Role.ASSISTANT,
            content=content,
            usage=usage,
            budget=budget,
            tool_calls=stored_calls,
            prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens,
            cost=None if turn.cost is None else Decimal(str(turn.cost)).quantize(Decimal("0.000001")),
            duration=turn.latency,
        )
        _usage_save(trajectory, usage)
        overspent = usage.exhausted(budget)
        if overspent in ("tokens", "cost"):
            ended = overspent
            break
        submitted = False
        disk_over = ""
        per_turn = settings.AGENT_TOOL_CALLS_PER_TURN
        for number, call in enumerate(calls):
            name = call["function"]["name"]
            seconds_left = tick()
            begun = clock()
            if submitted:
                output = "not run: the answer was already submitted"
            elif number >= per_turn:
                output = f"not run: at most {per_turn} tool calls per turn"
            elif steps.full:
                output = "not run: the trajectory's size cap is reached; the item ends"
            elif disk_over:
                output = "not run: the workspace is over its limit; the item ends"
            elif seconds_left <= 0:
                output = "not run: the wall-time budget is spent"
            else:
                result = tool_call(
                    name=name,
                    arguments=call["function"]["arguments"],
                    workspace=workspace,
                    session=session,
                    limits=limits,
                    seconds_left=seconds_left,
                )
                output, submitted = result.output, result.submitted
                if name in WRITING_TOOLS and (
                    disk_over := workspace.over_limits(
                        disk_bytes=limits.disk_bytes, files=settings.AGENT_WORKSPACE_FILES
                    )
                ):
                    output += f"\n[{disk_over}: the item ends]"
            output = storable(output)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
            tick()
            steps.record(
                role=AgentStep.Role.TOOL,
                content=output,
                usage=usage,
                budget=budget,
                tool_call_id=call["id"][:200],
                tool_name=name[:50],
                duration=clock() - begun,
            )
        if submitted:
            ended = AgentTrajectory.End.SUBMITTED
            break
        if disk_over:
            ended = AgentTrajectory.End.DISK
            break
        tick()
        if usage.exhausted(budget):
            continue  # the check at the top ends it
        note = f"Budget left: {left_text(usage.left(budget))}."
        if malformed:
            note = f"error: your tool calls were malformed and none ran ({malformed}). {note}"
        elif not calls:
            note = f"Use the tools to work on the file, and call `{SUBMIT}` when done. {note}"
        messages.append({"role": "user", "content": note})
        steps.record(role=AgentStep.Role.USER, content=note, usage=usage, budget=budget)
    tick()
    _usage_save(trajectory, usage, ended)
    return AgentEnd(ended, usage)


def trajectory_start(*, run, snippet, sample: int, budget: Budget) -> AgentTrajectory:
    """The item's trajectory, begun afresh unless it already ended (a redelivered task then only scores it)."""
    trajectory, created = AgentTrajectory.objects.get_or_create(
        run=run, snippet=snippet, sample=sample, defaults={"budget": budget.as_dict()}
    )
    if not created and not trajectory.ended_by:
        # A worker lost mid-item: its workspace went with it, so the item starts over (steps kept until now go).
        trajectory.steps.all().delete()
        AgentTrajectory.objects.filter(pk=trajectory.pk).update(
            turns=0,
            prompt_tokens=0,
            completion_tokens=0,
            cost=Decimal(0),
            seconds=0,
            budget=budget.as_dict(),
            answer_problem="",
        )
        trajectory.refresh_from_db()
    return trajectory
