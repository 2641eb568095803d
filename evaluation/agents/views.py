"""An agent item's trajectory as JSON (docs/AGENT_RUNS.md), under the item page's visibility."""

from __future__ import annotations

from django.http import Http404, HttpRequest, JsonResponse

from evaluation import selectors
from evaluation.agents.selectors import trajectory_document, trajectory_of
from evaluation.views import _run_visible


def trajectory_json(request: HttpRequest, pk: int, outcome_pk: int) -> JsonResponse:
    run = _run_visible(request, pk)
    item = selectors.run_item(run=run, outcome_pk=outcome_pk, user=request.user)
    trajectory = trajectory_of(outcome=item.outcome) if item is not None else None
    if trajectory is None:
        raise Http404("No trajectory for this item.")  # the same answer for a held-out item as for none
    response = JsonResponse(trajectory_document(trajectory=trajectory), json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-item-{outcome_pk}-trajectory.json"'
    return response
