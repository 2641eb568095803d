"""Template context for maintainers' pages: how many flagged answers await their review (the Review page says)."""

from functools import cache

from django.http import HttpRequest

from benchmarks.selectors import user_is_maintainer
from evaluation.selectors.reviews import outcomes_awaiting_review


def flags_awaiting(request: HttpRequest) -> dict:
    # A callable, counted once and only where a template shows it: no query on any other page.
    @cache
    def count() -> int | None:
        if not user_is_maintainer(user=request.user):
            return None
        return outcomes_awaiting_review(user=request.user).count()

    return {"flags_awaiting": count}
