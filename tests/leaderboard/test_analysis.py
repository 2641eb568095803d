"""Ranks with ties, item difficulty and failure categories on the leaderboard, paper and difficulty pages and the
API, against hand-computed statistics on the demo release."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from benchmarks.models import Snippet
from benchmarks.paper2code.difficulty import point_biserial
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from evaluation.outcomes import Verdict
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db


def board(client, **query):
    return {r["model"]: r for r in client.get(reverse("api-leaderboard", args=["1.0.0"]), query).json()}


def test_ranks_tie_entries_no_test_separates(client, release):
    ids = list(Snippet.objects.filter(task__versions=release).order_by("pk").values_list("pk", flat=True))
    n, missed = len(ids), set(ids[:2])
    # Discordant items: top-low n (p = 2 / 2**n), mid-low n - 2, top-mid 2 (p = 2 / 2**2 = 0.5). Holm: the smallest
    # p times 3, the next times 2, the largest times 1.
    assert 3 * 2 / 2**n <= 0.05 and 2 * 2 / 2 ** (n - 2) <= 0.05
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    evaluate(release, model("top"), lambda s: True)
    evaluate(release, model("mid"), lambda s: s.pk not in missed)
    evaluate(release, model("low"), lambda s: False)
    rows = board(client)
    assert {m: r["rank"] for m, r in rows.items()} == {"reference": None, "top": 1, "mid": 1, "low": 3}
    assert rows["reference"]["rank_note"].startswith("calibration") and rows["top"]["rank_note"] == ""
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert "Holm-corrected at a family-wise level of 0.05" in body
    ranked = body.split('<tbody class="ranked">')[1].split("</tbody>")[0]
    assert ranked.index(">Top<") < ranked.index(">Mid<") < ranked.index(">Low<")
    assert '1 + the entries significantly better">3</span>' in ranked
    # Sorting by the score alone stays possible.
    by_score = client.get(reverse("leaderboard", args=["1.0.0"]), {"sort": "score", "dir": "asc"}).content.decode()
    by_score = by_score.split('<tbody class="ranked">')[1]
    assert by_score.index(">Low<") < by_score.index(">Mid<") < by_score.index(">Top<")


def test_a_run_missing_a_scored_item_is_not_ranked(client, release):
    evaluate(release, model("top"), lambda s: True)
    run = services.run_start(model=model("flaky"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for number, snippet in enumerate(Snippet.objects.filter(task__versions=release).select_related("task")):
        verdict = Verdict("error", "infrastructure", "engine gone") if number == 0 else Verdict("passed", "", "")
        services.outcome_record(
            run=run,
            snippet=snippet,
            sample=0,
            verdict=verdict,
            generation=services.calibration_generation(run=run, snippet=snippet, sample=0),
        )
    EvaluationRun.objects.filter(pk=run.pk).update(status="completed")
    from evaluation.scoring import run_scores_store

    run_scores_store(run=run)
    rows = board(client)
    assert rows["flaky"]["rank"] is None and "1 of" in rows["flaky"]["rank_note"]
    assert rows["top"]["rank"] == 1
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert ">unranked</span>" in body


def test_difficulty_by_hand_on_page_and_api(client, release):
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)  # calibration: left out
    evaluate(release, model("top"), lambda s: True)
    evaluate(release, model("mid"), lambda s: s.loc > 1)
    evaluate(release, model("low"), lambda s: False)
    score = {
        name: RunScore.objects.get(run__model__name=name, paper=None, split="").scaled_pass_rate
        for name in ("top", "mid", "low")
    }
    one = Snippet.objects.filter(task__versions=release, loc=1).select_related("task__paper").first()
    two = Snippet.objects.filter(task__versions=release, loc__gt=1).first()
    items = {i["item"]: i for i in client.get(reverse("api-difficulty", args=["1.0.0"])).json()}
    assert (items[one.pk]["models"], items[one.pk]["passed"], items[one.pk]["pass_share"]) == (3, 1, 1 / 3)
    assert items[one.pk]["point_biserial"] == pytest.approx(
        point_biserial([True, False, False], [score["top"], score["mid"], score["low"]])
    )
    assert items[two.pk]["pass_share"] == pytest.approx(2 / 3)
    listed = list(items)
    assert listed.index(one.pk) < listed.index(two.pk), "hardest first"
    csv_rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("api-difficulty", args=["1.0.0"]), {"format": "csv"}).content.decode())
        )
    )
    assert float(next(r for r in csv_rows if r["item"] == str(one.pk))["pass_share"]) == pytest.approx(1 / 3)
    paper = one.task.paper.slug
    only = client.get(reverse("api-difficulty", args=["1.0.0"]), {"paper": paper}).json()
    assert only and {i["paper"] for i in only} == {paper}
    page = client.get(reverse("release-difficulty", args=["1.0.0"])).content.decode()
    assert "Hardest snippets" in page and "1 of 3" in page and f"{items[one.pk]['point_biserial']:.2f}" in page
    paper_page = client.get(reverse("paper-detail", args=["1.0.0", paper])).content.decode()
    assert 'id="difficulty-table"' in paper_page and one.name in paper_page.split('id="difficulty-table"')[1]


def test_failure_categories_chart_and_table(client, release):
    categories = ["syntax", "name_import", "runtime", "wrong_result", "timeout", "memory"]
    snippets = list(Snippet.objects.filter(task__versions=release).order_by("pk"))
    category = {s.pk: categories[i % len(categories)] for i, s in enumerate(snippets)}
    run = services.run_start(model=model("mixed"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for i, snippet in enumerate(snippets):
        verdict = Verdict("passed", "", "") if i % 7 == 6 else Verdict("failed", category[snippet.pk], "x")
        services.outcome_record(
            run=run,
            snippet=snippet,
            sample=0,
            verdict=verdict,
            generation=services.calibration_generation(run=run, snippet=snippet, sample=0),
        )
    assert services.run_maybe_finish(run=run)
    expected = {"passed": sum(1 for i in range(len(snippets)) if i % 7 == 6)}
    for i, s in enumerate(snippets):
        if i % 7 != 6:
            expected[category[s.pk]] = expected.get(category[s.pk], 0) + 1
    body = client.get(
        reverse("leaderboard", args=["1.0.0"]),
        {"view": "failures"},
        headers={"HX-Request": "true", "HX-Target": "breakdown"},
    ).content.decode()
    assert "<html" not in body and 'id="failure-chart"' in body
    chart = json.loads(body.split('id="failure-data" type="application/json">')[1].split("</script>")[0])
    counts = {s["key"]: s["counts"][0] for s in chart["segments"]}
    assert counts == expected
    assert sum(s["shares"][0] for s in chart["segments"]) == pytest.approx(100.0)
    table = body.split('id="failure-table"')[1]
    assert f'<td class="num">{len(snippets)}</td>' in table and "Name or import error" in table


def test_held_out_snippets_only_for_maintainers(client, release, maintainer):
    from benchmarks.models import VersionTask

    VersionTask.objects.filter(version=release, task__paper__slug="dampnest").update(split=VersionTask.Split.HELD_OUT)
    for name, passes in (("top", lambda s: True), ("low", lambda s: False)):
        run = evaluate(release, model(name, owner=maintainer), passes)  # maintainers' models cover held-out items
        assert run.covers_held_out
    held = set(Snippet.objects.filter(task__paper__slug="dampnest").values_list("pk", flat=True))
    url = reverse("api-difficulty", args=["1.0.0"])
    anonymous = client.get(url).json()
    assert anonymous and not held & {i["item"] for i in anonymous}
    page = client.get(reverse("release-difficulty", args=["1.0.0"])).content.decode()
    assert "dampnest" not in page
    client.force_login(maintainer)
    assert held <= {i["item"] for i in client.get(url).json()}
    assert "dampnest" in client.get(reverse("release-difficulty", args=["1.0.0"])).content.decode()


def test_a_hostile_snippet_name_is_neither_a_formula_nor_markup(client, release):
    hostile = '=HYPERLINK("https://evil.example")<script>alert(1)</script>'
    snippet = Snippet.objects.filter(task__versions=release).first()
    Snippet.objects.filter(pk=snippet.pk).update(name=hostile)
    evaluate(release, model("top"), lambda s: True)
    evaluate(release, model("low"), lambda s: False)
    text = client.get(reverse("api-difficulty", args=["1.0.0"]), {"format": "csv"}).content.decode()
    row = next(r for r in csv.DictReader(io.StringIO(text)) if r["item"] == str(snippet.pk))
    assert row["snippet"] == "'" + hostile
    page = client.get(reverse("release-difficulty", args=["1.0.0"])).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
