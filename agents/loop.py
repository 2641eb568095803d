"""The agent loop in two halves that run as separate tasks: a turn (the model's call, on the `llm` queue) and its
tool calls (on the `sandbox` queue, in the item's workspace), until the agent submits or a budget runs out.

Every task starts from the stored rows, never from memory: the conversation is rebuilt from the trajectory's steps
(`messages_rebuilt`: the model sees exactly what it saw before), the usage from the trajectory's totals, the wall time
from the trajectory's creation (the item's start, across tasks and workers). A task writes its steps and the new totals
in one transaction at its end (`_Steps.flush`); a step index is unique per trajectory, so a task delivered twice for
the same step (a retry, a redelivery, a watchdog's re-dispatch racing the original) records nothing the second time.
A worker lost mid-task leaves the trajectory at its last stored step, and the item resumes from there; what an earlier
attempt used is kept.

Budgets: before each turn the item ends if any is spent. A turn that takes the tokens or cost past the budget ends
the item before its tool calls run; the last allowed turn's tool calls run. A command never runs past the wall-time
budget (its time limit is what is left) and everything a command started dies with it, so when the item ends no
process of the agent is left; the item is then scored on the workspace as it stands.

`agent_loop` runs both halves in one process (tests and tools); the Celery chain is agents/tasks.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from agents.budget import Budget, Usage, amount_text, left_text
from agents.models import AgentStep, AgentTrajectory
from agents.policies import Policy
from agents.tools import SUBMIT, WRITING_TOOLS, tool_call
from agents.workspace import Workspace, snapshot_delete
from common.money import usd
from common.text import storable
from evaluation.llm import ModelCallError
from evaluation.models import EvaluationRun
from sandbox import Limits, Session

SYSTEM_PROMPT = """\
You are implementing one block of code from a research paper's repository, working in a sandbox.

The repository is in your workspace, /sandbox (the paper's text, if given, is there too). In `{path}` the block \
"{name}" is replaced by two placeholder lines starting `# TODO: Implement block "{name}"`. Replace those two lines \
with the block's code (about {lines}, at the placeholder's indentation) using the file tools, then call \
`submit`. Your answer is what stands between the lines before and after the placeholder when you submit (or when a \
budget runs out): do not change any other line of `{path}`, or no answer can be read from it. Changes to other files \
are yours to test with, but they do not reach the grader's tests, which are not in the workspace.

Tools: `run` runs a shell command in /sandbox with the task's Python environment and no network, killed after \
{command_seconds:.0f} s, each output stream cut at {output_bytes} bytes; every process it started ends with it. \
`read_file`, `write_file`, `edit_file` (replace one exact occurrence), `list_files`, `submit`.

Your budget for this item: {turns} (model calls), {tokens} in and out, {seconds:,.0f} s of wall time, \
{cost}. After each turn you are told what is left.\
"""


def system_prompt(*, path: str, name: str, loc: int, budget: Budget, command_seconds: float, output_bytes: int) -> str:
    return SYSTEM_PROMPT.format(
        path=path,
        name=name,
        lines=f"{loc} line{'' if loc == 1 else 's'}",
        turns=amount_text("turns", budget.turns),
        tokens=amount_text("tokens", budget.tokens),
        seconds=budget.seconds,
        cost=usd(budget.cost),
        command_seconds=command_seconds,
        output_bytes=output_bytes,
    )


def _calls_malformed(calls) -> str:
    """Why the turn's tool calls cannot be carried out ("" if they can): each needs a string id, name and
    arguments, the arguments a JSON object. A call kept with other arguments (a truncated one, a bare string) would
    go back to the provider in every later request of the item, and litellm's conversion for providers that parse
    them (anthropic/, gemini/) fails on it before any request: the item would end an unscored model error on a turn
    the model wrote. Refused at the turn it arrives, it is kept as text only and the model is told why."""
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
        if problem := _arguments_problem(function["arguments"]):
            return f"the arguments of {storable(function['name'])[:100]!r} {problem}"
    return ""


def _arguments_problem(arguments: str) -> str:
    """Why a tool call's arguments are not a JSON object ("" when they are)."""
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        return f"are not valid JSON ({exc})"
    except RecursionError:
        return "are nested too deeply"
    return "" if isinstance(parsed, dict) else f"are a JSON {type(parsed).__name__}, not an object"


@dataclass(frozen=True)
class AgentEnd:
    ended_by: str  # AgentTrajectory.End
    usage: Usage
    error: str = ""  # the model call's failure (ended_by model_error)


@dataclass(frozen=True)
class TurnEnd:
    """What a turn task leaves for the next: the item ended, tools to run, or another turn."""

    recorded: bool  # False: another delivery of this task recorded the step (nothing to do)
    ended_by: str = ""
    tools: bool = False
    error: str = ""
    attempts: int = 0  # the failed model call's attempts (ended_by model_error)


class _Steps:
    """The steps a task adds after those stored; written together with the trajectory's new totals (`flush`)."""

    def __init__(self, trajectory: AgentTrajectory):
        self.trajectory = trajectory
        self.index = trajectory.steps.count()
        self.bytes = trajectory.steps_bytes  # the stored steps' text, held under AGENT_TRAJECTORY_BYTES
        self.pending: list[AgentStep] = []

    @property
    def full(self) -> bool:
        return self.bytes >= settings.AGENT_TRAJECTORY_BYTES

    def record(self, *, role: str, content: str = "", usage: Usage, budget: Budget, **fields) -> None:
        content = storable(content)
        self.pending.append(
            AgentStep(
                trajectory=self.trajectory,
                index=self.index,
                role=role,
                content=content,
                budget_left=usage.left(budget),
                **fields,
            )
        )
        self.index += 1
        self.bytes += len(content.encode("utf-8")) + len(json.dumps(fields.get("tool_calls") or []))

    def flush(self, usage: Usage, ended_by: str = "", **trajectory_fields) -> bool:
        """Store the pending steps and the usage at once; False when a step of that index is stored already (this
        task was delivered twice: the other delivery's steps stand)."""
        try:
            with transaction.atomic():
                AgentStep.objects.bulk_create(self.pending)
                AgentTrajectory.objects.filter(pk=self.trajectory.pk).update(
                    turns=usage.turns,
                    prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens,
                    cost=usage.cost,
                    seconds=round(usage.seconds, 3),
                    ended_by=ended_by,
                    steps_bytes=self.bytes,
                    **trajectory_fields,
                )
        except IntegrityError:
            return False
        self.pending = []
        return True


def usage_stored(trajectory: AgentTrajectory) -> Usage:
    """What the item used up to its last stored step (an earlier attempt's turns included)."""
    return Usage(
        turns=trajectory.turns,
        prompt_tokens=trajectory.prompt_tokens,
        completion_tokens=trajectory.completion_tokens,
        seconds=trajectory.seconds,
        cost=trajectory.cost if trajectory.turns else None,
    )


def _clock(trajectory: AgentTrajectory, usage: Usage, budget: Budget, now) -> Callable[[], float]:
    """`tick()`: the wall time since the item's start into usage; returns the seconds left."""
    started = trajectory.created_at.timestamp()

    def tick() -> float:
        usage.seconds = now() - started
        return budget.seconds - usage.seconds

    return tick


def messages_rebuilt(steps: Iterable[AgentStep]) -> list[dict[str, Any]]:
    """The conversation as the model is sent it, from the stored steps: every turn's request is built this way, so
    a resumed item sends exactly what the lost attempt sent."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        if step.role == AgentStep.Role.TOOL:
            messages.append({"role": "tool", "tool_call_id": step.tool_call_id, "content": step.content})
            continue
        message: dict[str, Any] = {"role": step.role, "content": step.content}
        calls = [c for c in step.tool_calls if "malformed" not in c]  # a refused turn was sent as text only
        if step.role == AgentStep.Role.ASSISTANT and calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ]
        messages.append(message)
    return messages


def conversation_start(*, trajectory: AgentTrajectory, system: str, prompt: str, budget: Budget) -> bool:
    """The system prompt and the item's prompt as the first two steps (False: stored already)."""
    steps = _Steps(trajectory)
    if steps.index:
        return False
    usage = Usage()
    steps.record(role=AgentStep.Role.SYSTEM, content=system, usage=usage, budget=budget)
    steps.record(role=AgentStep.Role.USER, content=prompt, usage=usage, budget=budget)
    return steps.flush(usage)


def _budget_note(steps: _Steps, usage: Usage, budget: Budget, *, malformed: str, called: bool) -> None:
    note = f"Budget left: {left_text(usage.left(budget))}."
    if malformed:
        note = f"error: your tool calls were malformed and none ran ({malformed}). {note}"
    elif not called:
        note = f"Use the tools to work on the file, and call `{SUBMIT}` when done. {note}"
    steps.record(role=AgentStep.Role.USER, content=note, usage=usage, budget=budget)


def outgrown(exc: ModelCallError, usage: Usage) -> bool:
    """Whether a failed model call ends the item as a budget does, scored on its workspace as it stands: the provider
    refused the conversation for what it holds (evaluation.llm.caused_by_request: past the model's context window,
    too large, against its policy) after the model's own turns and their tools' output were added to it. Left an
    unscored error, such a refusal would let an agent take the items it fails out of its score (a `cat` of a large
    file is enough). Refused on the first turn, the prompt is the platform's alone: an error, as a single-shot
    item's over-long prompt is; a provider's outage stays the provider's (retried, then an unscored error). Any other
    failed call after the first turn (timeouts, a rate limit, 5xx, a dropped connection) counts so when the provider
    answered the item's first prompt alone just after it (agents.policies.conversation_slowed)."""
    return exc.request_caused and usage.turns > 0


def turn_take(*, trajectory: AgentTrajectory, policy: Policy, budget: Budget, now=time.time) -> TurnEnd:
    """One model turn after the last stored step: its message and tool calls stored; the item ends first if a budget
    is spent or the trajectory is full."""
    trajectory.refresh_from_db()
    steps, usage = _Steps(trajectory), usage_stored(trajectory)
    tick = _clock(trajectory, usage, budget, now)
    tick()
    if ended := usage.exhausted(budget) or (AgentTrajectory.End.STORAGE if steps.full else ""):
        return TurnEnd(steps.flush(usage, ended), ended_by=ended)
    messages = messages_rebuilt(trajectory.steps.order_by("index"))
    try:
        turn = policy(messages, budget.seconds - usage.seconds)
    except ModelCallError as exc:
        if not usage.turns:  # no call was priced: what the item cost is unknown, never $0.00
            usage.cost = None
        if exc.deadline_passed or tick() <= 0:  # the budget ran out waiting on the model: scored as it stands
            tick()
            steps.record(
                role=AgentStep.Role.ASSISTANT,
                content=f"[the wall-time budget ran out during the model call: {exc}]",
                usage=usage,
                budget=budget,
            )
            return TurnEnd(steps.flush(usage, AgentTrajectory.End.SECONDS), ended_by=AgentTrajectory.End.SECONDS)
        tick()
        if outgrown(exc, usage):
            said = "the model refused"
            if exc.first_prompt_answered:
                said = "the provider timed out on" if exc.timed_out else "the provider failed on"
            steps.record(
                role=AgentStep.Role.ASSISTANT,
                content=f"[{said} the conversation as it stands: {exc}]",
                usage=usage,
                budget=budget,
            )
            return TurnEnd(steps.flush(usage, AgentTrajectory.End.CONTEXT), ended_by=AgentTrajectory.End.CONTEXT)
        steps.record(
            role=AgentStep.Role.ASSISTANT, content=f"[the model call failed: {exc}]", usage=usage, budget=budget
        )
        ended = AgentTrajectory.End.MODEL_ERROR
        return TurnEnd(steps.flush(usage, ended), ended_by=ended, error=str(exc), attempts=exc.attempts)
    usage.add_turn(prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens, cost=turn.cost)
    tick()
    content = turn.message.get("content")
    content = storable(content) if isinstance(content, str) else ""
    calls = turn.message.get("tool_calls") or []
    malformed = _calls_malformed(calls)
    if malformed:  # refused: the turn is kept as text only, and the model is told why nothing ran
        stored_calls: list[dict[str, Any]] = [{"malformed": storable(repr(calls))[:2000]}]
    else:
        stored_calls = [
            {
                "id": storable(c["id"])[:200],
                "name": storable(c["function"]["name"]),
                "arguments": storable(c["function"]["arguments"]),
            }
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
    overspent = usage.exhausted(budget)
    if overspent in ("tokens", "cost"):
        return TurnEnd(steps.flush(usage, overspent), ended_by=overspent)
    if stored_calls and not malformed:
        return TurnEnd(steps.flush(usage), tools=True)
    tick()  # nothing to run: what is left is said at once (or the next turn's check ends the item)
    if not usage.exhausted(budget):
        _budget_note(steps, usage, budget, malformed=malformed, called=False)
    return TurnEnd(steps.flush(usage))


def tools_pending(step: AgentStep | None) -> bool:
    """Whether the last stored step is a turn whose tool calls have not run yet."""
    return (
        step is not None
        and step.role == AgentStep.Role.ASSISTANT
        and bool(step.tool_calls)
        and not any("malformed" in c for c in step.tool_calls)
    )


def agent_acted(*, run: EvaluationRun, snippet, sample: int) -> bool:
    """Whether the item's agent asked to run a command or change a file (a stored turn calling a writing tool; a turn's
    calls count before they run, as its first call can break its second): from then on an infrastructure error may be
    its own doing (evaluation.outcomes.agent_error_held). An uploaded run's agent ran elsewhere: only its answer is
    tested here, as a single-shot answer is."""
    if run.is_upload:
        return False
    turns = AgentStep.objects.filter(
        trajectory__run=run, trajectory__snippet=snippet, trajectory__sample=sample, role=AgentStep.Role.ASSISTANT
    ).values_list("tool_calls", flat=True)
    return any(
        isinstance(call, dict) and call.get("name") in WRITING_TOOLS and "malformed" not in call
        for calls in turns
        for call in calls or ()
    )


def _run_active(trajectory: AgentTrajectory) -> bool:
    run = EvaluationRun.objects.filter(pk=trajectory.run_id).only("status").first()
    return run is not None and run.is_active


def tools_carry(
    *,
    trajectory: AgentTrajectory,
    workspace: Workspace,
    session: Session,
    limits: Limits,
    budget: Budget,
    now=time.time,
    stored: Callable[[str], dict] | None = None,
) -> tuple[bool, str]:
    """Run the tool calls of the last stored turn in the workspace; returns (recorded, ended_by or ""). Their
    outputs, the budget note and `stored(ended_by)`'s trajectory fields (the task's workspace snapshot) are
    written at once."""
    trajectory.refresh_from_db()
    steps, usage = _Steps(trajectory), usage_stored(trajectory)
    tick = _clock(trajectory, usage, budget, now)
    last = trajectory.steps.order_by("-index").first()
    calls = last.tool_calls if last is not None and tools_pending(last) else []
    submitted = False
    disk_over = ""
    per_turn = settings.AGENT_TOOL_CALLS_PER_TURN
    for number, call in enumerate(calls):
        name = call["name"]
        seconds_left = tick()
        begun = time.monotonic()
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
        elif not _run_active(trajectory):  # a cancel frees the slot after this command, not after the whole turn's
            output = "not run: the run was cancelled"
        else:
            result = tool_call(
                name=name,
                arguments=call["arguments"],
                workspace=workspace,
                session=session,
                limits=limits,
                seconds_left=seconds_left,
            )
            output, submitted = result.output, result.submitted
            if name in WRITING_TOOLS and (
                disk_over := workspace.over_limits(disk_bytes=limits.disk_bytes, files=settings.AGENT_WORKSPACE_FILES)
            ):
                output += f"\n[{disk_over}: the item ends]"
        tick()
        steps.record(
            role=AgentStep.Role.TOOL,
            content=output,
            usage=usage,
            budget=budget,
            tool_call_id=call["id"][:200],
            tool_name=name[:50],
            duration=time.monotonic() - begun,
        )
    tick()
    ended = ""
    if submitted:
        ended = AgentTrajectory.End.SUBMITTED
    elif disk_over:
        ended = AgentTrajectory.End.DISK
    elif spent := usage.exhausted(budget):  # what the next turn's check would find, found here
        ended = spent
    else:
        _budget_note(steps, usage, budget, malformed="", called=True)
        if steps.full:
            ended = AgentTrajectory.End.STORAGE
    fields = stored(ended) if stored is not None else {}
    ended = fields.pop("ended_by", ended)
    return steps.flush(usage, ended, **fields), ended


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
    now=time.time,
) -> AgentEnd:
    """The whole item in this process: the turns and their tools in turn (the tasks chain the same halves)."""
    conversation_start(trajectory=trajectory, system=system, prompt=prompt, budget=budget)
    error = ""
    while True:
        turn = turn_take(trajectory=trajectory, policy=policy, budget=budget, now=now)
        if turn.ended_by:
            error = turn.error
            break
        if turn.tools:
            _, ended = tools_carry(
                trajectory=trajectory, workspace=workspace, session=session, limits=limits, budget=budget, now=now
            )
            if ended:
                break
    trajectory.refresh_from_db()
    return AgentEnd(trajectory.ended_by, usage_stored(trajectory), error)


def trajectory_start(*, run, snippet, sample: int, budget: Budget) -> AgentTrajectory:
    """The item's trajectory: begun now, or the one an earlier attempt left (its steps and usage kept: the item
    resumes from its last stored step)."""
    trajectory, _ = AgentTrajectory.objects.get_or_create(
        run=run, snippet=snippet, sample=sample, defaults={"budget": budget.as_dict(), "cost": None}
    )
    return trajectory


def trajectories_restart(*, run, items: Iterable[tuple[int, int]]) -> None:
    """Items (snippet id, sample) whose model call failed, on a resume of their paused run: they start over, as a
    single-shot item is asked again (their trajectories and stored workspaces go)."""
    for snippet_id, sample in items:
        trajectory = AgentTrajectory.objects.filter(run=run, snippet_id=snippet_id, sample=sample).first()
        if trajectory is not None:
            snapshot_delete(trajectory.workspace_snapshot)
            trajectory.delete()
