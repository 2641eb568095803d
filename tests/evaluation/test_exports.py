"""An export is the page (issue 37): the leaderboard's CSV and JSON links carry the page's filters, sort and
columns, in the full page and in the table htmx swaps in; the address the guide teaches keeps its filter; a run
manifest's answer hash is the hash of the answer that was scored, whatever field it came in."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re

import pytest
from django.urls import reverse

from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.outcomes import Verdict
from tests.leaderboard.test_leaderboard import evaluate, model
from tests.leaderboard.test_leaderboard_agent_rows import agent

pytestmark = pytest.mark.django_db

HTMX_TABLE = {"HX-Request": "true", "HX-Target": "leaderboard-table"}

# Every filter the page offers, each alone, a pair, and the sorts that change the order.
FILTERS = [
    {},
    {"open": "1"},
    {"paper": "with"},
    {"paper": "without"},
    *({"provenance": value} for value in EvaluationRun.Provenance.values),
    {"mode": "single"},
    {"mode": "agent"},
    {"q": "lab"},
    {"q": "zul"},
    {"mode": "agent", "open": "1"},
    {"sort": "model", "dir": "asc"},
    {"sort": "model", "dir": "desc"},
    {"sort": "score", "dir": "asc"},
    {"paper": "without", "sort": "model", "dir": "desc"},
]


@pytest.fixture
def board(release):
    """Rows that every filter splits: open and closed weights, with and without the paper, three provenances, both
    modes, two organizations, and reference lines of both modes."""
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    agent(evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True))
    evaluate(release, ModelEntry.objects.get(name="placeholder"), lambda s: False)
    evaluate(release, model("alpha", display_name="Alpha", open_weights=True, organization="Lab"), lambda s: s.loc > 3)
    evaluate(release, model("zulu", display_name="Zulu"), lambda s: True)
    evaluate(release, model("zulu-np", display_name="Zulu NP"), lambda s: s.loc > 4, with_paper=False)
    self_reported = evaluate(release, model("upl", display_name="Uploaded"), lambda s: s.loc > 2)
    EvaluationRun.objects.filter(pk=self_reported.pk).update(provenance="self_reported")
    agent(evaluate(release, model("agent", display_name="Agent", open_weights=True), lambda s: s.loc > 5))
    return release


def page_badges(body: str) -> dict[int, tuple[str, str, str]]:
    """Each row's provenance badge by its run: (class, title, word), e.g. ("calibration", "A built-in ...",
    "calibration")."""
    table = body.split('id="leaderboard-table"')[1].split("</table>")[0]
    badges = {}
    for row in table.split("<tr")[1:]:
        run = re.search(r'href="/runs/(\d+)/"', row)
        badge = re.search(r'<span class="badge provenance (\w+)" title="([^"]*)">([^<]*)</span>', row)
        if run and badge:
            badges[int(run.group(1))] = (badge.group(1), html.unescape(badge.group(2)), badge.group(3))
    return badges


def page_runs(body: str) -> list[int]:
    """The run of each row of the page's table, top to bottom (a row's first run link is its own run)."""
    table = body.split('id="leaderboard-table"')[1].split("</table>")[0]
    runs = []
    for row in table.split("<tr")[1:]:
        found = re.search(r'href="/runs/(\d+)/"', row)
        if found:
            runs.append(int(found.group(1)))
    return runs


def export_links(body: str) -> dict[str, str]:
    """The page's export links by their text (CSV, JSON)."""
    links = re.findall(r'<a href="([^"]*)"[^>]*>(CSV|JSON)</a>', body)
    return {kind.lower(): html.unescape(href) for href, kind in links}


@pytest.mark.parametrize("query", FILTERS, ids=lambda q: "&".join(f"{k}={v}" for k, v in q.items()) or "none")
def test_every_filters_export_rows_are_the_pages_rows(client, board, query):
    url = reverse("leaderboard", args=[board.name])
    for response in (client.get(url, query), client.get(url, query, headers=HTMX_TABLE)):
        body = response.content.decode()
        shown = page_runs(body)
        links = export_links(body)
        assert set(links) == {"csv", "json"}, "the export links are beside the table htmx swaps in"
        json_rows = client.get(links["json"]).json()
        assert [row["run"] for row in json_rows] == shown, (query, links["json"])
        text = client.get(links["csv"]).content.decode()
        csv_rows = list(csv.DictReader(io.StringIO(text)))
        assert [int(row["run"]) for row in csv_rows] == shown, (query, links["csv"])
        # What the row's badge says, the exports say: a reference line's read "verified" while its badge said
        # "calibration".
        badges = page_badges(body)
        for row in [*json_rows, *csv_rows]:
            value, statement, _ = badges[int(row["run"])]
            assert (row["provenance"], row["provenance_statement"]) == (value, statement), (query, row["run"])
    assert any(
        page_runs(client.get(url, q).content.decode()) != page_runs(client.get(url).content.decode())
        for q in FILTERS[1:]
    )
    words = {
        word for value, _, word in page_badges(client.get(url).content.decode()).values() if value == "calibration"
    }
    assert words == {"calibration"}, "the reference lines are on the page"


def test_the_csv_has_the_pages_columns_and_the_json_every_field(client, board):
    url = reverse("leaderboard", args=[board.name])
    body = client.get(url, {"cols": "tokens", "mode": "single"}).content.decode()
    links = export_links(body)
    assert "cols=tokens" in links["csv"] and "mode=single" in links["csv"]
    header = next(csv.reader(io.StringIO(client.get(links["csv"]).content.decode())))
    page_columns = re.findall(r'<th scope="col"[^>]*data-column="(\w+)"', body)
    assert header[0] == "run" and [key for key in header if key in page_columns] == page_columns, (header, page_columns)
    assert "scaled_ci_low" in header and "cost_per_item" in header, "the fields a page cell shows beside its value"
    assert "prompt_tokens" not in header and "organization" not in header, "a column the page does not show"
    every = client.get(reverse("api-leaderboard-csv", args=[board.name])).content.decode()
    assert len(next(csv.reader(io.StringIO(every)))) > len(header), "without cols the CSV has every column"
    assert "tokens" in client.get(links["json"]).json()[0]


def test_the_address_the_guide_teaches_keeps_its_filter(client, board):
    response = client.get("/leaderboard/", {"mode": "agent", "sort": "model", "dir": "asc"})
    assert response.status_code == 302
    assert response["Location"] == reverse("leaderboard", args=[board.name]) + "?mode=agent&sort=model&dir=asc"


def test_the_api_leaderboard_takes_the_pages_sort(client, board):
    api = reverse("api-leaderboard", args=[board.name])
    names = [r["model"] for r in client.get(api, {"sort": "model", "dir": "asc"}).json() if r["rank"] is not None]
    assert names == sorted(names, key=str.lower) and len(names) > 2


def test_a_code_uploads_answer_hash_is_the_hash_of_the_code_scored(client, release, maintainer):
    """Was the empty string's hash for every answer uploaded as `code`."""
    run = services.run_start(model=model("coder"), version=release, dispatch=False)  # answers stored as an upload's
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippets = list(Snippet.objects.filter(task__versions=release))
    for snippet in snippets:
        generation = services.generation_record(
            run=run, snippet=snippet, sample=0, prompt="p", code=snippet.reference_code
        )
        services.outcome_record(
            run=run, snippet=snippet, sample=0, verdict=Verdict("passed", "", ""), generation=generation
        )
    client.force_login(maintainer)
    manifest = json.loads(b"".join(client.get(reverse("run-manifest", args=[run.pk])).streaming_content))
    by_item = {s.pk: s for s in snippets}
    empty = hashlib.sha256(b"").hexdigest()
    for item in manifest["items"]:
        code = by_item[item["item"]].reference_code
        assert item["answer_hash"] == hashlib.sha256(code.encode()).hexdigest() != empty
        assert item["answer_field"] == "code"


def test_a_breakdown_tab_click_changes_the_address(client, board):
    """A tab swapped in by htmx pushed no address, so the page's link (and the back button) lost the tab."""
    body = client.get(reverse("leaderboard", args=[board.name]), {"mode": "agent"}).content.decode()
    tabs = body.split('<nav class="tabs" aria-label="Breakdowns">')[1].split("</nav>")[0]
    for tab in tabs.split("<a ")[1:]:
        fetched = re.search(r'hx-get="([^"]*)"', tab).group(1)
        assert f'hx-push-url="{fetched}"' in tab and "mode=agent" in fetched, tab
