"""What an agent run needs at its start: its budget, and a model that can call tools."""

from __future__ import annotations

from agents.budget import BudgetError, budget_for_run
from evaluation.errors import BudgetRefused, EvaluationError
from evaluation.llm import tools_supported


def agent_run_settings(*, model, version, budget: dict | None) -> dict:
    """The run's agent budget; EvaluationError when the model cannot run as an agent."""
    from evaluation.models import ModelEntry

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
