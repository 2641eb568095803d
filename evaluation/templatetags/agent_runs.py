"""The item page's agent transcript (an include that reads the item's trajectory, so the item view stays as is)."""

from __future__ import annotations

from django import template

from evaluation.agents.budget import budget_text
from evaluation.agents.selectors import STEP_FOLD_CHARS, trajectory_of

register = template.Library()


@register.inclusion_tag("evaluation/agents/_trajectory.html")
def agent_trajectory(run, outcome) -> dict:
    trajectory = trajectory_of(outcome=outcome) if run.mode == "agent" else None
    return {"run": run, "outcome": outcome, "trajectory": trajectory, "fold": STEP_FOLD_CHARS}


@register.filter(name="budget_text")
def budget_text_filter(budget: dict | None) -> str:
    return budget_text(budget)
