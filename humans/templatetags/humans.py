"""Template filters of the human baseline: an item's human pass rate beside the models' (difficulty tables), and a
person's own attempt beside the item on its paper page."""

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

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
    label, css = (attempt.state, attempt.state) if attempt.state != "submitted" else verdict_badge(attempt.verdict)
    return format_html(
        '<span class="my-attempt" data-testid="my-attempt"><a href="{}">Your attempt</a>: '
        '<span class="badge {}" data-testid="my-attempt-verdict">{}</span>{}</span>',
        reverse("attempt-detail", args=[attempt.pk]),
        css,
        label,
        " (excluded from the figures)" if attempt.excluded else "",
    )


# A submitted attempt's verdict as every page names it: (label, badge class); failed is anything else scored.
_VERDICTS = {
    None: ("being scored", "pending"),
    "passed": ("passed", "passed"),
    "flagged": ("flagged, under review", "flagged"),
    "error": ("not scored (infrastructure error)", "error"),
}


def verdict_badge(verdict: str | None) -> tuple[str, str]:
    """A submitted attempt's badge, (label, class): its verdict once scored, "being scored" until then."""
    return _VERDICTS.get(verdict, ("not passed", "failed"))


@register.simple_tag
def attempt_badge(attempt, verdict: str | None = None, heading: bool = False, out_of_band: bool = False) -> str:
    """The attempt's badge: its state while live or abandoned, its verdict once submitted (`verdict`: the outcome's
    status, None while scored). `heading`: the attempt page's own, which the polled result replaces once the verdict
    is in (`out_of_band`)."""
    if attempt.state == "submitted":
        label, css = verdict_badge(verdict)
    else:
        label, css = attempt.get_state_display(), attempt.state
    mark = mark_safe(' id="attempt-state" data-testid="attempt-state"') if heading or out_of_band else ""
    swap = mark_safe(' hx-swap-oob="true"') if out_of_band else ""
    return format_html('<span class="badge {}"{}{}>{}</span>', css, mark, swap, label)


@register.filter
def withdrawn_note(withdrawn: dict | None, snippet_pk: int) -> str:
    """Why an item is no longer offered to the person (REFERENCE_RULE), beside it on the paper page; "" when it is."""
    where = (withdrawn or {}).get(snippet_pk)
    if not where:
        return ""
    return format_html('<span class="muted" data-testid="withdrawn">Not offered to you: {}.</span>', where)
