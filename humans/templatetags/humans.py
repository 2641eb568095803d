"""Template filters of the human baseline: an item's human pass rate beside the models' (difficulty tables), and a
person's own attempt beside the item on its paper page."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

register = template.Library()


@register.filter
def human_rate(rates: dict | None, snippet_pk: int) -> str:
    """'2 of 3 (67%)' people passing the item, marked thin when too few tried it; a dash when no one did."""
    rate = (rates or {}).get(snippet_pk)
    if rate is None:
        return format_html('<span class="muted" title="{}">—</span>', "No person's attempt at this item is scored yet")
    thin = format_html(' <span class="badge thin" title="{}">thin</span>', "Fewer people than the thin mark tried it")
    return format_html("{} of {} ({}%){}", rate.passed, rate.people, round(rate.share), thin if rate.thin else "")


@register.filter
def minutes(seconds: object) -> str:
    """Working time as minutes and seconds, e.g. '3 min 07 s' (a missing value reaches a filter as '')."""
    if not isinstance(seconds, (int, float)):
        return "—"
    whole = int(round(float(seconds)))
    return f"{whole // 60} min {whole % 60:02d} s"


@register.filter
def my_attempt(mine: dict | None, snippet_pk: int) -> str:
    """The person's own attempt at the item, linked: its verdict once scored, else its state; "" when none."""
    attempt = (mine or {}).get(snippet_pk)
    if attempt is None:
        return ""
    if attempt.state != "submitted":
        label, css = attempt.state, attempt.state
    else:
        label, css = _VERDICTS.get(attempt.verdict, ("not passed", "failed"))
    return format_html(
        '<span class="my-attempt" data-testid="my-attempt"><a href="{}">Your attempt</a>: '
        '<span class="badge {}" data-testid="my-attempt-verdict">{}</span>{}</span>',
        reverse("attempt-detail", args=[attempt.pk]),
        css,
        label,
        " (excluded from the figures)" if attempt.excluded else "",
    )


# A submitted attempt's verdict as its paper page names it: (label, badge class); failed is anything else scored.
_VERDICTS = {
    None: ("being scored", "pending"),
    "passed": ("passed", "passed"),
    "flagged": ("flagged, under review", "flagged"),
    "error": ("not scored (infrastructure error)", "error"),
}


@register.filter
def withdrawn_note(withdrawn: dict | None, snippet_pk: int) -> str:
    """Why an item is no longer offered to the person (REFERENCE_RULE), beside it on the paper page; "" when it is."""
    where = (withdrawn or {}).get(snippet_pk)
    if not where:
        return ""
    return format_html('<span class="muted" data-testid="withdrawn">Not offered to you: {}.</span>', where)
