"""An agent item's trajectory as JSON (docs/AGENT_RUNS.md), under the item page's visibility."""

from __future__ import annotations

from django.http import Http404, HttpRequest, JsonResponse

from agents.atif import trajectory_atif
from agents.models import AgentTrajectory
from agents.selectors import trajectory_document, trajectory_of
from evaluation.models import EvaluationRun
from evaluation.selectors import item_pages as item_pages_selectors
from evaluation.views import _run_visible


def _trajectory_visible(request: HttpRequest, pk: int, outcome_pk: int) -> tuple[EvaluationRun, AgentTrajectory]:
    run = _run_visible(request, pk)
    item = item_pages_selectors.run_item(run=run, outcome_pk=outcome_pk, user=request.user)
    trajectory = trajectory_of(outcome=item.outcome) if item is not None else None
    if trajectory is None:
        raise Http404("No trajectory for this item.")  # the same answer for a held-out item as for none
    return run, trajectory


def _attachment(document: dict, filename: str) -> JsonResponse:
    response = JsonResponse(document, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def trajectory_json(request: HttpRequest, pk: int, outcome_pk: int) -> JsonResponse:
    run, trajectory = _trajectory_visible(request, pk, outcome_pk)
    return _attachment(trajectory_document(trajectory=trajectory), f"run-{run.pk}-item-{outcome_pk}-trajectory.json")


def trajectory_atif_json(request: HttpRequest, pk: int, outcome_pk: int) -> JsonResponse:
    """The same trajectory in Harbor's ATIF (agents/atif.py)."""
    run, trajectory = _trajectory_visible(request, pk, outcome_pk)
    return _attachment(trajectory_atif(trajectory=trajectory, run=run), f"run-{run.pk}-item-{outcome_pk}-atif.json")
