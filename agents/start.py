"""What a run's mode needs at its start: an agent run's budget, and a model that can call tools."""

from __future__ import annotations

from agents.budget import BudgetError, budget_for_run
from evaluation.errors import BudgetRefused, EvaluationError
from evaluation.llm import tools_supported

MODES = ("single", "agent")


def run_mode_settings(*, model, version, mode: str, budget: dict | None) -> dict:
    """The run's agent budget ({} for a single-shot run); EvaluationError when the mode cannot be run."""
    from evaluation.models import ModelEntry

    if mode not in MODES:
        raise EvaluationError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
    if mode == "single":
        if budget:
            raise EvaluationError("a budget is for agent runs (mode agent)")
        return {}
    if model.kind not in (ModelEntry.Kind.LITELLM, ModelEntry.Kind.REFERENCE, ModelEntry.Kind.PLACEHOLDER):
        raise EvaluationError(f"model {model.name} is not called, so it cannot run as an agent")
    if model.kind == ModelEntry.Kind.LITELLM and not tools_supported(
        model=model.litellm_model, api_base=model.api_base or None
    ):
        raise EvaluationError(
            f"model {model.name} ({model.litellm_model}) cannot call tools as litellm knows it, so "
            f"it cannot run as an agent; run it single-shot"
        )
    try:
        return budget_for_run(version=version, requested=budget).as_dict()
    except BudgetError as exc:
        raise BudgetRefused(exc.problems) from exc
