"""The leaderboard's layout (issue 22): the key columns always, the rest behind a column toggle read from `cols=` by
the one column list; a one-line summary linking how ranks work and the API's CSV and JSON export; the score-over-time
chart's data from the same rows; every breakdown renders when opened by link."""

from __future__ import annotations

from datetime import date

import pytest
from django.http import QueryDict
from django.urls import reverse

from evaluation.models import ModelEntry
from leaderboard import charts
from leaderboard.selectors import columns as columns_selectors
from leaderboard.selectors import table as table_selectors
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db
KEY = ["rank", "display_name", "mode", "scaled_pass_rate", "pass_rate", "cost", "provenance", "finished_on"]


def headers(body: str) -> list[str]:
    thead = body.split('id="leaderboard-table"')[1].split("</thead>")[0]
    return [part.split('"')[0] for part in thead.split('data-column="')[1:]]


def test_the_key_columns_are_the_one_lists_untoggled_page_columns():
    assert [c.key for c in columns_selectors.LEADERBOARD_KEY_COLUMNS] == KEY
    assert {c.key for c in columns_selectors.LEADERBOARD_TOGGLED_COLUMNS} >= {
        "errors",
        "flagged",
        "tokens",
        "organization",
        "held_out_scaled_pass_rate",
    }
    assert set(columns_selectors.LEADERBOARD_KEY_COLUMNS + columns_selectors.LEADERBOARD_TOGGLED_COLUMNS) == set(
        columns_selectors.LEADERBOARD_PAGE_COLUMNS
    )
    # Every page column is in the API and CSV, whether the page shows it or not.
    assert set(columns_selectors.LEADERBOARD_PAGE_COLUMNS) <= set(columns_selectors.LEADERBOARD_COLUMNS)


def test_the_counts_of_unscored_and_flagged_items_say_what_they_count():
    """A newcomer's walk: "Test gaming" had a tooltip, "Flags" and "Errors" beside it none, so nothing said that
    Flags counts answers still awaiting review (0 once reviewed) and Errors items left out of the score."""
    titles = {c.key: c.title for c in columns_selectors.LEADERBOARD_PAGE_COLUMNS}
    assert "awaiting a maintainer's review" in titles["flagged"]
    assert "left out of the score" in titles["errors"]


@pytest.mark.parametrize(
    "query, chosen",
    [
        ("", ()),
        ("cols=tokens", ("tokens",)),
        ("cols=tokens&cols=errors", ("errors", "tokens")),
        ("cols=tokens,errors,nonsense", ("errors", "tokens")),
        ("cols=cost", ()),  # a key column: always shown
        ("cols=rank", ()),
        ("cols=", ()),
    ],
)
def test_cols_names_toggled_columns_in_the_lists_order(query, chosen):
    assert columns_selectors.leaderboard_columns_chosen(QueryDict(query)) == chosen
    page = [c.key for c in columns_selectors.leaderboard_page_columns(chosen=chosen)]
    assert page == KEY + list(chosen)


def test_the_page_shows_the_key_columns_and_the_toggle_adds_the_rest(client, release):
    evaluate(release, model("lab", organization="Lab"), lambda s: True, cost=None)
    url = reverse("leaderboard", args=["1.0.0"])
    body = client.get(url).content.decode()
    assert headers(body) == KEY
    assert 'id="column-toggle"' in body and 'name="cols" value="errors"' in body and " open>" not in body
    chosen = client.get(url, {"cols": ["errors", "tokens"], "sort": "score"}).content.decode()
    assert headers(chosen) == KEY + ["errors", "tokens"]
    assert 'name="cols" value="errors" checked' in chosen and 'id="column-toggle" open' in chosen
    # Sort links and breakdown tabs keep the chosen columns; the htmx table partial shows them too.
    assert "cols=errors%2Ctokens" in chosen.split('id="leaderboard-table"')[1].split("</thead>")[0]
    assert "cols=errors%2Ctokens" in chosen.split('id="breakdown"')[1]
    partial = client.get(url, {"cols": "flagged"}, headers={"HX-Request": "true", "HX-Target": "leaderboard-table"})
    assert headers(partial.content.decode()) == KEY + ["flagged"]


def test_the_summary_is_one_line_with_how_ranks_work_and_the_apis_export(client, release):
    evaluate(release, model("lab"), lambda s: True)
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"provenance": "verified", "q": "la"}).content.decode()
    summary = body.split('id="leaderboard-summary"')[1].split("</p>")[0]
    assert f'href="{reverse("guide", args=["leaderboard"])}#how-ranks-work"' in summary
    # The export sits inside the table htmx swaps, so it follows every filter change (issue 37), with the page's
    # sort and columns too (tests/evaluation/test_exports.py compares the rows).
    table = body.split('id="leaderboard-table"')[1].split("<table")[0]
    query = "provenance=verified&amp;q=la&amp;sort=rank&amp;dir=asc&amp;cols="
    csv_link = f"{reverse('api-leaderboard-csv', args=['1.0.0'])}?{query}"
    json_link = f"{reverse('api-leaderboard', args=['1.0.0'])}?{query}"
    assert f'href="{csv_link}"' in table and f'href="{json_link}"' in table
    assert client.get(csv_link.replace("&amp;", "&"))["Content-Type"].startswith("text/csv")
    assert [r["model"] for r in client.get(json_link.replace("&amp;", "&")).json()] == ["lab"]
    guide = client.get(reverse("guide", args=["leaderboard"])).content.decode()
    assert 'id="how-ranks-work"' in guide and 'id="which-run-is-a-models-row"' in guide
    assert "Holm" in guide.split('id="how-ranks-work"')[1].split("<h3")[0]


def test_the_over_time_chart_plots_ranked_rows_at_their_cutoff(client, release):
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    evaluate(release, model("old", knowledge_cutoff=date(2024, 1, 1)), lambda s: False)
    evaluate(release, model("new", knowledge_cutoff=date(2025, 6, 1)), lambda s: True)
    evaluate(release, model("undated"), lambda s: True)
    rows = table_selectors.leaderboard_rows(version=release)
    chart = charts.leaderboard_over_time(rows=rows)
    assert [(p["label"], p["date"], p["value"]) for p in chart["points"]] == [
        ("Old (with paper)", "2024-01-01", 0.0),
        ("New (with paper)", "2025-06-01", 100.0),
    ]
    assert chart["undated"] == 1, "the calibration line is not a model of its time; the undated row is counted"
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert 'id="over-time-chart"' in body and 'id="over-time-data"' in body and "1 row with no known cut-off" in body


@pytest.mark.parametrize("view", ["papers", "sizes", "ablation", "contamination", "failures"])
def test_every_breakdown_renders_when_opened_by_link(client, release, view):
    """The charts' script is deferred, so it runs after the breakdown below it is parsed (`?view=failures` was
    blank until its tab was clicked: the script ran before the canvas existed)."""
    evaluate(release, model("lab", knowledge_cutoff=date(2025, 1, 1)), lambda s: s.loc > 2)
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": view}).content.decode()
    assert f'view={view}#breakdown"\n       hx-get' in body and 'aria-current="page"' in body
    script = body.index('src="/static/js/leaderboard.js"')
    assert body[:script].rstrip().endswith("<script defer"), "deferred: runs once the whole page is parsed"
    assert body.index('id="breakdown"') < script
    if view == "failures":
        assert 'id="failure-chart"' in body and 'id="failure-data"' in body
