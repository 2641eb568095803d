"""The read side's pages: a release's leaderboard and its breakdowns, two runs compared, its snippets by difficulty,
and the home page's and a release page's parts (registered with benchmarks.pages)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from benchmarks.pages import page_extras
from benchmarks.selectors import version_get
from benchmarks.visibility import changelog_visible
from common.htmx import HtmxHttpRequest
from evaluation.models import RUN_MODES
from evaluation.provenance import provenance_choices, provenance_legend
from evaluation.scoring import SIZE_BUCKETS
from evaluation.selectors.runs import LEADERBOARD_RUN_RULE
from leaderboard import analysis, charts
from leaderboard.comparison import comparison_from_query
from leaderboard.errors import ComparisonError
from leaderboard.selectors import breakdowns as breakdowns_selectors
from leaderboard.selectors import columns as columns_selectors
from leaderboard.selectors import releases as releases_selectors
from leaderboard.selectors import table as table_selectors

BREAKDOWNS = {
    "papers": "Per paper",
    "sizes": "By snippet size",
    "ablation": "With vs. without paper",
    "contamination": "After knowledge cut-off",
    "failures": "Failure categories",
}


def leaderboard_latest(request: HttpRequest) -> HttpResponse:
    """The newest release with results (its page says when a newer release has none yet)."""
    version, _ = releases_selectors.leaderboard_releases()
    if version is None:
        raise Http404("No benchmark version is published yet.")
    query = request.GET.urlencode()  # `/leaderboard/?mode=agent` is a filtered page someone sent: keep its filters
    return redirect(reverse("leaderboard", args=[version.name]) + (f"?{query}" if query else ""))


def leaderboard(request: HtmxHttpRequest, name: str) -> HttpResponse:
    version = version_get(name=name, user=request.user)
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise Http404("Drafts have no leaderboard.")
    filters = table_selectors.LeaderboardFilters.from_query(request.GET)
    chosen = columns_selectors.leaderboard_columns_chosen(request.GET)
    rows = table_selectors.leaderboard_rows(version=version, filters=filters)
    context = {
        "version": version,
        "rows": rows,
        "filters": filters,
        "ranked": [row for row in rows if not row.calibration],
        "calibration": [row for row in rows if row.calibration],
        "provenances": provenance_choices(),
        "modes": RUN_MODES,
        "provenance_legend": provenance_legend(),
        "columns": _sort_links(filters, chosen),
        "toggled_columns": columns_selectors.LEADERBOARD_TOGGLED_COLUMNS,
        "chosen_columns": chosen,
        "filter_query": _query(filters, cols=",".join(chosen)),
        # The exports are the page: its filters, its order, and (for the CSV) its columns; `cols=` even when empty.
        "export_query": _query(filters) + "&" + urlencode({"cols": ",".join(chosen)}),
        "rank_method": analysis.RANK_METHOD,
        "run_rule": LEADERBOARD_RUN_RULE,
        "newest": releases_selectors.latest_published_version(),
    }
    if not context["ranked"] and not filters.any:
        context["with_results"] = releases_selectors.release_with_results_before(version=version)
    target = request.htmx.target if request.htmx else None
    if target == "leaderboard-table":
        return render(request, "leaderboard/_leaderboard_table.html", context)
    view = request.GET.get("view", "papers")
    view = view if view in BREAKDOWNS else "papers"
    context.update(view=view, breakdowns=BREAKDOWNS)
    context.update(_breakdown(version=version, rows=rows, view=view, user=request.user))
    if target == "breakdown":
        return render(request, "leaderboard/_leaderboard_breakdown.html", context)
    context.update(
        chart=charts.leaderboard_ranking_chart(rows=rows),
        chart_height=80 + 36 * len(rows),
        over_time=charts.leaderboard_over_time(rows=rows),
        cost_scatter=charts.leaderboard_cost_scatter(rows=rows),
        **page_extras("leaderboard", version=version, user=request.user),
    )
    return render(request, "leaderboard/leaderboard.html", context)


def _breakdown(*, version: BenchmarkVersion, rows, view: str, user) -> dict:
    if view == "sizes":
        return {
            "size_labels": [label for label, _, _ in SIZE_BUCKETS],
            "size_rows": breakdowns_selectors.leaderboard_size_buckets(rows=rows, user=user),
        }
    if view == "ablation":
        return {"ablation": breakdowns_selectors.leaderboard_paper_ablation(rows=rows)}
    if view == "contamination":
        return {"contamination": breakdowns_selectors.leaderboard_contamination(version=version, rows=rows, user=user)}
    if view == "failures":
        segments, table = analysis.leaderboard_failures(rows=rows)
        chart = {
            "labels": [f"{r.row.run.model.display_name} ({r.row.setting})" for r in table],
            "segments": [
                {
                    "label": label,
                    "key": key,
                    "shares": [r.shares[i] for r in table],
                    "counts": [r.counts[i] for r in table],
                }
                for i, (key, label) in enumerate(segments)
            ],
        }
        return {
            "failure_segments": segments,
            "failures": table,
            "failure_chart": chart,
            "failure_chart_height": 80 + 32 * len(table),
        }
    return {"heatmap": breakdowns_selectors.leaderboard_paper_heatmap(version=version, rows=rows, user=user)}


def _query(filters: table_selectors.LeaderboardFilters, **override) -> str:
    params = {
        "open": "1" if filters.open_weights else "",
        "paper": filters.paper,
        "provenance": filters.provenance,
        "mode": filters.mode,
        "scaffold": filters.scaffold,
        "q": filters.q,
        "sort": filters.sort,
        "dir": "desc" if filters.descending else "asc",
    }
    params.update(override)
    return urlencode({k: v for k, v in params.items() if v})


def _sort_links(filters: table_selectors.LeaderboardFilters, chosen: tuple[str, ...]) -> list[dict]:
    """Each header of the columns shown links to its sort (keeping the chosen columns); clicking the current one
    flips the direction."""
    columns = []
    for column in columns_selectors.leaderboard_page_columns(chosen=chosen, agent_view=filters.mode == "agent"):
        key, label = column.sort, column.label
        current = filters.sort == key
        default_desc = key in ("score", "pass", "held_out", "items", "tokens", "date")  # best first (rank: 1 first)
        descending = not filters.descending if current else default_desc
        values_descend = filters.descending  # the arrow and aria-sort say the order of the values shown
        columns.append(
            {
                "key": key,
                "label": label,
                "column": column,
                "current": current,
                "aria": ("descending" if values_descend else "ascending") if current else "none",
                "arrow": "▼" if values_descend else "▲",
                "query": _query(filters, sort=key, dir="desc" if descending else "asc", cols=",".join(chosen)),
            }
        )
    return columns


def home_results(*, user) -> dict:
    """The home page's leaderboard part (registered with benchmarks.pages): the current release's top rows, counts
    and changelog."""
    current, newest = releases_selectors.leaderboard_releases()
    top = releases_selectors.leaderboard_top(version=current) if current else None
    with_results = (
        releases_selectors.release_with_results_before(version=current) if current and top and not top.ranked else None
    )
    # A release with its reference lines but no model yet lists no ranked row: the latest ranked rows are shown
    # beside it, from the release that has them (walk 4: the board pointed there from an empty row only).
    earlier = releases_selectors.leaderboard_top(version=with_results) if with_results else None
    return {
        "current": current,
        "newest": newest,
        "calibration": top.calibration if top else [],
        "ranked": top.ranked if top else [],
        "summary_columns": columns_selectors.LEADERBOARD_SUMMARY_COLUMNS,
        "counts": top.counts if top else None,
        "scoring": releases_selectors.release_runs_scoring(version=current) if current else [],
        "changelog": changelog_visible(version=current, user=user) if current else None,
        "with_results": with_results,
        "earlier_ranked": earlier.ranked if earlier else [],
        "earlier_counts": earlier.counts if earlier else None,
    }


def release_calibration(*, version: BenchmarkVersion, user) -> dict:
    """A release page's reference lines (registered with benchmarks.pages): ready, or how far their runs are."""
    if not version.is_frozen:
        return {}
    return {"reference_lines": releases_selectors.release_calibration(version=version)}


def paper_difficulty(*, version: BenchmarkVersion, task, user) -> dict:
    """A paper page's difficulty table (registered with benchmarks.pages); drafts have no runs."""
    if not version.is_frozen:
        return {}
    rows = table_selectors.leaderboard_rows(version=version)
    return {"difficulty": analysis.snippet_difficulty(version=version, rows=rows, user=user, task=task)}


DIFFICULTY_PAGE_ITEMS = 100  # the page lists the hardest; the downloads hold every snippet


def release_difficulty(request: HttpRequest, name: str) -> HttpResponse:
    """The release's snippets, hardest first: the share of leaderboard entries passing each and how well passing it
    separates strong from weak entries (held-out ones for maintainers only)."""
    version = version_get(name=name, user=request.user)
    if version.status == BenchmarkVersion.Status.DRAFT:
        raise Http404("Drafts have no results.")
    rows = table_selectors.leaderboard_rows(version=version)
    items = analysis.snippet_difficulty(version=version, rows=rows, user=request.user)
    return render(
        request,
        "leaderboard/difficulty.html",
        {
            "version": version,
            "items": items[:DIFFICULTY_PAGE_ITEMS],
            "total": len(items),
            "entries": sum(not r.calibration for r in rows),
            "run_rule": LEADERBOARD_RUN_RULE,
            **page_extras("difficulty", version=version, user=request.user),
        },
    )


def release_compare(request: HttpRequest, name: str) -> HttpResponse:
    version = version_get(name=name, user=request.user)
    try:
        result = comparison_from_query(version=version, params=request.GET, user=request.user)
    except ComparisonError as exc:
        return render(request, "leaderboard/compare.html", {"error": str(exc), "release": name}, status=400)
    return render(request, "leaderboard/compare.html", {"result": result, "release": name})
