"""Template filters for scores wherever a page shows one: percentages, heat-map colours, the scaled pass@1 help, a
run's provenance and mode badges, token counts (the leaderboard's own cells are leaderboard's tag library)."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

from evaluation.models import AWAITING_REVIEW_LABEL, AWAITING_REVIEW_SAID
from evaluation.provenance import provenance_of, row_provenance

register = template.Library()


@register.filter
def heat(value: float | None) -> str:
    """A light background from red (0%) to green (100%), dark text stays readable on every shade."""
    # A missing cell reaches the filter as the template's '' (an attribute of None), not as None.
    if not isinstance(value, (int, float)):
        return "background: #f6f8fa"
    return f"background: hsl({round(1.2 * max(0.0, min(100.0, value)))}, 70%, 82%)"


@register.filter
def pct(value: float | str | None) -> str:  # "": a template's missing value
    return "—" if value is None or value == "" else f"{value:.1f}%"


# What "scaled pass@1" means, in a line, wherever a score is shown; the leaderboard guide says it in full.
SCALED_MEANING = (
    "Scaled pass@1: the share of the benchmark's code the model writes correctly, each snippet weighted by its lines "
    "of code (pass@1 counts every snippet once); the reference code scores 100%"
)


@register.simple_tag
def scaled_help() -> str:
    """A "?" beside a scaled pass@1 header: the meaning as its tooltip, the guide's section as its link."""
    return format_html(
        '<a class="help" href="{}#scaled-pass1" title="{}" aria-label="What scaled pass@1 means">?</a>',
        reverse("guide", args=["leaderboard"]),
        SCALED_MEANING,
    )


@register.filter
def provenance_badge(run) -> str:
    """The row's mark: calibration models are reference lines; other runs say what the platform vouches for."""
    said = row_provenance(run)
    return format_html('<span class="badge provenance {}" title="{}">{}</span>', said.value, said.statement, said.label)


@register.filter
def mode_badge(run) -> str:
    """The run's mode as a short label ("single-shot" or "agent"), the same on every page that lists runs."""
    return format_html('<span class="badge mode {}">{}</span>', run.mode, run.get_mode_display())


@register.filter
def provenance_statement(run) -> str:
    """What the platform vouches for about the run's answers, in the words of every other surface, after the run's
    badge (which says the label)."""
    return provenance_of(run).beside_badge


@register.simple_tag
def awaiting_review_label() -> str:
    return AWAITING_REVIEW_LABEL


@register.simple_tag
def awaiting_review_said() -> str:
    return AWAITING_REVIEW_SAID


TOKENS_UNKNOWN = (
    "Not reported: at least one answer came with no token count (uploaded answers, or a provider that gave none)"
)


@register.filter
def token_count(value: object) -> str:
    """A token total as every page says it: thousands separated, and a dash (never 0) when it is not known, "not
    reported" in its tooltip and to a screen reader (last session's walk: "unknown" read as the platform's failure to
    count, where nothing was counted)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return format_html(
        '<span class="muted" title="{}"><span aria-hidden="true">—</span>'
        '<span class="visually-hidden">{}</span></span>',
        TOKENS_UNKNOWN,
        "not reported",
    )
