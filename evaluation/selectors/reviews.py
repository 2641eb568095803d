"""Flagged outcomes awaiting a maintainer's review, across runs: the maintainers' queue and its count."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from benchmarks.selectors import user_is_maintainer
from evaluation.judging.verdict import REPLAY_DISAGREES
from evaluation.models import AWAITING_REVIEW, Outcome
from evaluation.selectors.runs import outcomes_of_items_visible, runs_visible

FLAG_QUEUE_ITEMS = 50


def outcomes_awaiting_review(*, user) -> QuerySet[Outcome]:
    """Flagged outcomes a review can still move (AWAITING_REVIEW: not one whose tests failed), newest first, of the
    runs and items the user may see (held-out items for maintainers only). A person's attempt is not here: it is
    reviewed on its attempt's page."""
    flagged = Outcome.objects.filter(AWAITING_REVIEW, run__in=runs_visible(user=user))
    return outcomes_of_items_visible(outcomes=flagged, user=user).order_by("-created_at", "-pk")


@dataclass
class FlaggedRow:
    outcome: Outcome
    kinds: list[str]  # what flagged it: its findings' kinds (notes kept beside a verdict are not flags)
    difference: str  # the sealed replay's difference, for maintainers only (it can quote recorded values)


def flag_queue_page(*, user, page: str | int | None) -> Page:
    """One page of the outcomes awaiting review, each with what flagged it."""
    outcomes = outcomes_awaiting_review(user=user).select_related("run__model", "run__version", "snippet__task__paper")
    current = Paginator(outcomes, FLAG_QUEUE_ITEMS).get_page(page)
    evidence = user_is_maintainer(user=user)
    # The ignore: the page keeps its paginator's counts of outcomes and shows each one as a FlaggedRow.
    current.object_list = [_row(o, evidence=evidence) for o in current.object_list]  # type: ignore[misc]
    return current


def _row(outcome: Outcome, *, evidence: bool) -> FlaggedRow:
    flags = [f for f in outcome.findings if isinstance(f, dict) and not f.get("note")]
    replay = next((f for f in flags if f.get("kind") == REPLAY_DISAGREES), None)
    return FlaggedRow(
        outcome=outcome,
        kinds=sorted({str(f.get("kind", "")) for f in flags}),
        difference=str(replay.get("detail", "")) if replay and evidence else "",
    )
