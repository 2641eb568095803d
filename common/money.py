"""The one money format of the site: every cost shown (leaderboard, run, item and trajectory, budgets, messages)
goes through `usd` (the `usd` template filter is this function)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

UNAVAILABLE = "unavailable"  # an unknown cost is never shown as 0


def usd(value: object) -> str:
    """US dollars by one rule: 2 decimals at or above $1 and for a known zero ($12.34, $0.00); below $1 four
    significant digits, trailing zeros dropped down to cents, never past the stored micro-dollar ($0.50, $0.0123,
    $0.002, $0.000012); "unavailable" when the cost is unknown (None; a template's missing attribute reaches a
    filter as '')."""
    if value is None or value == "" or isinstance(value, bool):
        return UNAVAILABLE
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return UNAVAILABLE
    if not amount.is_finite():
        return UNAVAILABLE
    if amount == 0 or abs(amount) >= 1:
        return f"${amount:,.2f}"
    places = min(6, 3 - abs(amount).adjusted())  # 4 significant digits: 0.1234 has adjusted() -1
    text = f"{amount:.{places}f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"
