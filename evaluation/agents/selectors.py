"""Reads of agent trajectories for pages and downloads."""

from __future__ import annotations

from evaluation.agents.models import AgentTrajectory

TRAJECTORY_FORMAT = "rcb-agent-trajectory/1"
STEP_FOLD_CHARS = 1500  # a step longer than this shows folded on the item page


def trajectory_of(*, outcome) -> AgentTrajectory | None:
    return (
        AgentTrajectory.objects.filter(run_id=outcome.run_id, snippet_id=outcome.snippet_id, sample=outcome.sample)
        .select_related("run")
        .prefetch_related("steps")
        .first()
    )


def trajectory_document(*, trajectory: AgentTrajectory) -> dict:
    """The trajectory as documented in docs/AGENT_RUNS.md."""
    return {
        "format": TRAJECTORY_FORMAT,
        "uploaded": bool(trajectory.run.params.get("uploaded")),
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
