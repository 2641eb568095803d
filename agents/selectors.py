"""Reads of agent trajectories for pages and downloads."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, Sum

from agents.models import AgentTrajectory
from benchmarks import visibility
from benchmarks.paper2code.markers import code_indent
from common.highlight import answer_diff

TRAJECTORY_FORMAT = "rcb-agent-trajectory/1"
STEP_FOLD_CHARS = 1500  # a step longer than this shows folded on the item page


def trajectory_of(*, outcome) -> AgentTrajectory | None:
    return (
        AgentTrajectory.objects.filter(run_id=outcome.run_id, snippet_id=outcome.snippet_id, sample=outcome.sample)
        .select_related("run")
        .prefetch_related("steps")
        .first()
    )


# The diff's two sides, as the item page names them.
DIFF_LABELS = ("the masked start (the placeholder)", "the agent's final snippet body")


def answer_against_start(*, outcome) -> str:
    """What the agent changed where it was asked to: a unified diff from the placeholder lines the masked file had
    to the snippet body read from its final file ("" when there is no answer or it left the placeholder as it
    was). The final file itself is not kept once the item is scored; edits elsewhere never reach the test."""
    generation = outcome.generation
    if generation is None or not generation.extracted_code:
        return ""
    snippet = outcome.snippet
    indent = code_indent(snippet.reference_code)
    placeholder = (
        f'{indent}# TODO: Implement block "{snippet.name}"\n{indent}# Approximately {snippet.loc} line(s) of code.\n'
    )
    return answer_diff(reference=placeholder, answer=generation.extracted_code, labels=DIFF_LABELS)


def trajectory_document(*, trajectory: AgentTrajectory) -> dict:
    """The trajectory as documented in docs/AGENT_RUNS.md."""
    return {
        "format": TRAJECTORY_FORMAT,
        "uploaded": trajectory.run.is_upload,
        "run": trajectory.run_id,
        "snippet": trajectory.snippet_id,
        "sample": trajectory.sample,
        "budget": trajectory.budget,
        "ended_by": trajectory.ended_by,
        "usage": {
            "turns": trajectory.turns,
            "prompt_tokens": trajectory.prompt_tokens,
            "completion_tokens": trajectory.completion_tokens,
            "cost": None if trajectory.cost is None else float(trajectory.cost),
            "seconds": trajectory.seconds,
        },
        "answer_problem": trajectory.answer_problem,
        "steps": [step.as_dict() for step in trajectory.steps.all()],
    }


@dataclass(frozen=True)
class AgentRunSummary:
    """What an agent run's items used, in total, and which budget ended how many of them (the run page's summary)."""

    items: int
    ended_by: list[tuple[str, int]]  # (what ended the item, how many), in the order of AgentTrajectory.End
    turns: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal | None  # None, never 0, when any turn's cost is unknown
    seconds: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def agent_run_summary(*, run, public_only: bool = False) -> AgentRunSummary | None:
    """Totals over the run's agent items (aggregates only, as the run's scores), over its public split's only where
    the viewer may not see what held-out items spent (visibility.usage_withheld); None for a single-shot run."""
    if run.mode != "agent":
        return None
    trajectories = AgentTrajectory.objects.filter(run=run)
    if public_only:
        trajectories = trajectories.filter(
            snippet__task__memberships__version=run.version_id, snippet__task__memberships__split=visibility.PUBLIC
        )
    groups = list(
        trajectories.order_by()
        .values("ended_by")
        .annotate(
            n=Count("pk"),
            turns_sum=Sum("turns"),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            cost_sum=Sum("cost"),
            unknown_cost=Count("pk", filter=Q(cost__isnull=True)),
            seconds_sum=Sum("seconds"),
        )
    )
    counts = {g["ended_by"]: g["n"] for g in groups}
    return AgentRunSummary(
        items=sum(counts.values()),
        ended_by=[(label, counts[value]) for value, label in AgentTrajectory.End.choices if counts.get(value)],
        turns=sum(g["turns_sum"] or 0 for g in groups),
        prompt_tokens=sum(g["prompt"] or 0 for g in groups),
        completion_tokens=sum(g["completion"] or 0 for g in groups),
        cost=None
        if any(g["unknown_cost"] for g in groups)
        else sum((g["cost_sum"] or Decimal(0) for g in groups), Decimal(0)),
        seconds=sum(g["seconds_sum"] or 0.0 for g in groups),
    )
