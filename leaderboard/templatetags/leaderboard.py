"""The leaderboard's cells: each column's classes and formatted value (a score's own filters are evaluation's
`scores` tag library)."""

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from agents.budget import amount_text
from common.money import usd
from evaluation.models import AWAITING_REVIEW_SAID
from evaluation.templatetags.scores import mode_badge, pct, provenance_badge, token_count

register = template.Library()


RANK_TITLES = {True: "no entry is significantly better", False: "1 + the entries significantly better"}


COST_UNAVAILABLE = "The cost of at least one item is unknown (a model litellm has no price for, or published results)"


OWNER_ENDPOINT_FAILED_SAID = (
    "items whose model call failed at the model's own endpoint (an HTTP error, a timeout, no connection), counted as "
    "failed: an endpoint its owner runs could otherwise fail exactly the items its model cannot solve"
)


REPEAT_KEY = (
    "the mean across the {} runs started together (repeat) ± the standard error of that mean (the runs' sample "
    "standard deviation / √n), not a confidence interval"
)


def _repeated(mean: float, se: float | None, runs: int, *, strong: bool) -> str:
    """A repeat group's score: the mean across its runs ± the standard error, keyed as such (the column's header
    names a 95% interval, which a single run's cell shows)."""
    return format_html(
        '{} <span class="ci">± {}</span> <span class="muted repeat-key">(<abbr title="{}">mean ± SE</abbr> over {} '
        "runs)</span>",
        format_html("<strong>{}</strong>", pct(mean)) if strong else pct(mean),
        f"{se:.1f}" if se is not None else "—",
        REPEAT_KEY.format(runs),
        runs,
    )


@register.simple_tag
def leaderboard_class(column, header: bool = False) -> str:
    """The classes of a leaderboard column's cells: numbers aligned, the score marked, dates kept on one line, and
    the columns a phone folds away (`fold`)."""
    classes = []
    if column.kind in ("int", "float", "decimal"):
        classes.append("num")
        if column.key == "scaled_pass_rate" and not header:
            classes.append("score")
    elif column.kind == "date" and not header:
        classes.append("date")
    if column.folds:
        classes.append("fold")
    return " ".join(classes)


@register.simple_tag
def leaderboard_cell(row, column) -> str:
    """One page cell of a leaderboard row; columns whose value needs more than text are formatted here."""
    value = column.value(row)
    score = row.score
    if column.key == "rank":
        return _rank_cell(row, value)
    if column.key == "display_name":
        return _name_cell(row, value)
    if column.key == "mode":
        return mode_badge(row.run)
    if column.key == "provenance":
        return _provenance_cell(row)
    if column.key == "scaled_pass_rate" and row.runs_count > 1:
        return _repeated(row.scaled_mean, row.scaled_se, row.runs_count, strong=True)
    if column.key == "pass_rate" and row.runs_count > 1:
        return _repeated(row.pass_mean, row.pass_se, row.runs_count, strong=False)
    if column.key == "cost":
        return _cost_cell(row, value)
    if column.key == "turns_per_item":
        return _turns_cell(row)
    if column.key == "scaled_pass_rate":
        return _scaled_cell(row, value)
    if column.key == "pass_rate":
        return format_html(
            '{} <span class="ci">[{}, {}]</span>',
            pct(value),
            f"{score.pass_rate_ci_low:.1f}",
            f"{score.pass_rate_ci_high:.1f}",
        )
    if column.key == "test_gaming":
        return format_html('{} <span class="muted">({}%)</span>', value, f"{row.gaming_rate:.1f}")
    if column.key == "flagged" and value:
        return format_html(
            '<span class="badge flagged" title="{}">{}</span>',
            AWAITING_REVIEW_SAID,
            value,
        )
    if column.key == "held_out_scaled_pass_rate":
        return _held_out_cell(row, value)
    return _plain_cell(column, value)


def _rank_cell(row, value) -> str:
    if row.calibration:
        return "ref."
    if value is None:
        return format_html('<span class="muted unranked" title="{}">unranked</span>', row.rank_note)
    return format_html('<span title="{}">{}</span>', RANK_TITLES[value == 1], value)


def _name_cell(row, value) -> str:
    chosen = "pinned by the model's owner" if row.run.pinned_at else "the latest completed in this setting"
    name = format_html(
        '<a href="{}">{}</a> <a class="muted" href="{}" title="{}">{}</a>',
        reverse("model-detail", args=[row.run.model.name]),
        value,
        reverse("run-detail", args=[row.run.pk]),
        f"run {row.run.pk}: {chosen}",
        row.run.paper_label,  # the Mode column names the mode
    )
    if row.runs_count == 1:
        return name
    runs = format_html_join(
        ", ", '<a href="{}">#{}</a>', ((reverse("run-detail", args=[pk]), pk) for pk in row.repeat_runs)
    )
    return format_html('{} <span class="muted repeats">(runs {})</span>', name, runs)


def _provenance_cell(row) -> str:
    if row.run.source:
        return format_html('{} <span class="muted source">{}</span>', provenance_badge(row.run), row.run.source)
    return provenance_badge(row.run)


def _cost_cell(row, value) -> str:
    if value is None:
        return format_html('<span class="muted" title="{}">{}</span>', COST_UNAVAILABLE, usd(None))
    if row.runs_count > 1:  # keyed like the score cells: a mean over the group's runs
        return format_html(
            '{} <span class="muted per-item">({}/item)</span> <span class="muted repeat-key">(mean over {} '
            "runs)</span>",
            usd(value),
            usd(row.cost_per_item),
            row.runs_count,
        )
    return format_html('{} <span class="muted per-item">({}/item)</span>', usd(value), usd(row.cost_per_item))


def _turns_cell(row) -> str:
    if row.agent is None:
        why = (
            "uploaded without trajectories: unknown"
            if row.run.mode == "agent"
            else "single-shot: one prompt, one answer"
        )
        return format_html('<span class="muted" title="{}">—</span>', why)
    turns = f"{row.agent.turns:.1f}".removesuffix(".0")
    return format_html(  # a mean of turns keeps its decimal; tokens and seconds as budgets are said
        '{} <span class="muted">turn{} ·<br>{} · {}</span>',
        turns,
        "" if turns == "1" else "s",
        amount_text("tokens", round(row.agent.tokens)),
        amount_text("seconds", row.agent.seconds),
    )


def _scaled_cell(row, value) -> str:
    score = row.score
    cell = format_html(
        '<strong>{}</strong> <span class="ci">[{}, {}]</span>',
        pct(value),
        f"{score.scaled_ci_low:.1f}",
        f"{score.scaled_ci_high:.1f}",
    )
    if score.flagged:  # beside the headline, whatever columns are shown: these items count as not passed
        cell += format_html(
            ' <span class="badge flagged" title="{}">{} awaiting review</span>',
            AWAITING_REVIEW_SAID,
            score.flagged,
        )
    if row.owner_endpoint_failed:
        cell += format_html(
            ' <span class="badge failed" title="{}">{} failed at its own endpoint</span>',
            OWNER_ENDPOINT_FAILED_SAID,
            row.owner_endpoint_failed,
        )
    return cell


def _held_out_cell(row, value) -> str:
    if row.held_out is None:
        return format_html(
            '<span class="muted" title="{}">public only</span>',
            "Uploads and runs of models not trusted with held-out prompts cover the public split only",
        )
    return format_html('{} <span class="ci">({} items)</span>', pct(value), row.held_out.items)


def _plain_cell(column, value) -> str:
    """A cell of a column whose kind says how to write it (bool, date, decimal, token counts), else its text."""
    if column.kind == "bool":
        return "yes" if value else "no"
    if column.kind == "date":
        return value.strftime("%Y-%m-%d") if value else "unknown"
    if column.kind == "decimal":
        return usd(value)
    if column.kind == "int" and column.key.endswith("tokens"):
        return token_count(value)
    return str(value) if value not in (None, "") else "—"
