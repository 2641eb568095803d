"""The one money format of the site: every cost shown (leaderboard, run, item and trajectory, budgets) goes
through `usd`."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()

UNAVAILABLE = "unavailable"  # an unknown cost is never shown as 0


@register.filter
def usd(value: object) -> str:
    """US dollars with as many decimals as the amount needs: $12.34, $0.0123, $0.0020, $0.000012 (the stored
    precision);
    "unavailable" when the cost is unknown (None; a template's missing attribute reaches a filter as '')."""
    if value is None or value == "":
        return UNAVAILABLE
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return UNAVAILABLE
    # Two significant digits at least below a dollar, never past the stored micro-dollar.
    places = 2 if amount == 0 or abs(amount) >= 1 else min(6, max(4, 1 - abs(amount).adjusted()))
    return f"${amount:,.{places}f}"
