"""Leaderboard, model and run pages: ranking with intervals, sorting and filters, breakdowns, no leaks, bounded
queries."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmarks.models import Snippet, VersionTask
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from evaluation.outcomes import Verdict
from evaluation.scoring import run_scores_store
from tests.conftest import cache_empty, page_text

pytestmark = pytest.mark.django_db


def evaluate(release, model, passes, *, with_paper=True, answer="", cost=0):
    """A completed run whose item passes when `passes(snippet)` is true."""
    run = services.run_start(model=model, version=release, with_paper=with_paper, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for snippet in Snippet.objects.filter(task__versions=release).select_related("task"):
        generation = services.generation_record(
            run=run,
            snippet=snippet,
            sample=0,
            prompt="p",
            raw_answer=answer or f"```python\nanswer_{snippet.pk} = 1\n```",
            prompt_tokens=10,
            completion_tokens=5,
            cost=cost,
        )
        verdict = Verdict("passed", "", "") if passes(snippet) else Verdict("failed", "wrong_result", "assert")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    return run


def model(name, **fields):
    fields.setdefault("litellm_model", f"openai/{name}")
    return ModelEntry.objects.create(name=name, display_name=fields.pop("display_name", name.title()), **fields)


def test_leaderboard_ranks_by_scaled_pass_rate_and_shows_intervals(client, release):
    """Calibration models are reference lines above the ranking; the other entries are ranked."""
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    evaluate(release, ModelEntry.objects.get(name="placeholder"), lambda s: False)
    evaluate(release, model("halfway", organization="Lab"), lambda s: s.loc >= 3)
    evaluate(release, model("nothing"), lambda s: False)
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    table = body.split('id="leaderboard-table"')[1].split("</table>")[0]
    reference_lines, ranked = table.split('<tbody class="ranked">')
    assert "Reference (calibration)" in reference_lines and "Placeholder (calibration)" in reference_lines
    order = [ranked.index(f'href="{reverse("model-detail", args=[n])}"') for n in ("halfway", "nothing")]
    assert order == sorted(order) and "(calibration)" not in ranked
    halfway = RunScore.objects.get(run__model__name="halfway", paper=None, split="")
    assert 0 < halfway.scaled_pass_rate < 100 and halfway.scaled_pass_rate > halfway.pass_rate
    assert f"{halfway.scaled_pass_rate:.1f}%" in body
    assert f"[{halfway.scaled_ci_low:.1f}, {halfway.scaled_ci_high:.1f}]" in body
    assert "100.0%" in body and "[100.0, 100.0]" in body
    assert 'id="ranking-data"' in body and "chart-4.6.1.umd.min.js" in body


def test_only_the_latest_completed_run_per_model_and_setting_counts(client, release):
    placeholder = ModelEntry.objects.get(name="placeholder")
    old = evaluate(release, placeholder, lambda s: True)
    new = evaluate(release, placeholder, lambda s: False)
    services.run_start(model=placeholder, version=release, dispatch=False)  # queued: not on the board
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert reverse("run-detail", args=[new.pk]) in body
    assert reverse("run-detail", args=[old.pk]) not in body


def test_unknown_cost_reads_unavailable(client, release):
    """Cost is a key column (issue 23: single-shot and agent rows side by side with cost): an unknown total reads
    "unavailable", never 0, in the page, the API and the CSV."""
    evaluate(release, model("pricey"), lambda s: True, cost=None)
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    row = body.split('<tbody class="ranked">')[1].split("</tr>")[0]
    cost = row.split('<td class="num">')[-1]
    assert ">unavailable</span></td>" in cost and "$0" not in row, row
    record = client.get(reverse("api-leaderboard", args=["1.0.0"])).json()[0]
    assert record["cost"] is None and record["cost_per_item"] is None


def test_sorting_and_filters_with_htmx_partial(client, release):
    evaluate(release, model("alpha", display_name="Alpha", open_weights=True), lambda s: False)
    evaluate(release, model("zulu", display_name="Zulu"), lambda s: True)
    evaluate(release, model("zulu-np", display_name="Zulu NP"), lambda s: s.loc > 4, with_paper=False)
    url = reverse("leaderboard", args=["1.0.0"])
    by_name = client.get(
        url, {"sort": "model", "dir": "asc"}, headers={"HX-Request": "true", "HX-Target": "leaderboard-table"}
    )
    body = by_name.content.decode()
    assert "<html" not in body and 'id="leaderboard-table"' in body
    assert body.index(">Alpha<") < body.index(">Zulu<") < body.index(">Zulu NP<")
    assert "sort=model&amp;dir=desc" in body, "the current column's header flips the direction"
    ranked = client.get(url).content.decode()
    assert ranked.index(">Zulu<") < ranked.index(">Alpha<")
    open_only = client.get(url, {"open": "1"}).content.decode()
    assert ">Alpha<" in open_only and ">Zulu<" not in open_only
    without = client.get(url, {"paper": "without"}).content.decode()
    assert ">Zulu NP<" in without and ">Alpha<" not in without
    search = client.get(url, {"q": "zul"}).content.decode()
    assert ">Zulu<" in search and ">Alpha<" not in search
    assert client.get(url, {"sort": "nonsense"}).status_code == 200


def test_per_paper_heat_map_shows_stored_per_paper_rates(client, release):
    evaluate(release, model("dampnest-only"), lambda s: s.task.paper.slug == "dampnest")
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "papers"}).content.decode()
    assert "Per paper" in body
    cells = body.split('class="heatmap"')[1].split("</table>")[0]
    assert cells.count("100.0%") == 1 and cells.count("0.0%") == 3  # 100.0% contains "0.0%" once
    assert "hsl(120, 70%, 82%)" in cells and "hsl(0, 70%, 82%)" in cells


def test_size_buckets_from_outcomes(client, release):
    evaluate(release, model("small-only"), lambda s: s.loc <= 2)
    small = Snippet.objects.filter(task__versions=release, loc__lte=2).count()
    body = client.get(
        reverse("leaderboard", args=["1.0.0"]),
        {"view": "sizes"},
        headers={"HX-Request": "true", "HX-Target": "breakdown"},
    ).content.decode()
    assert "<html" not in body
    assert f'100.0% <span class="ci">({small}/{small})</span>' in body
    big = Snippet.objects.filter(task__versions=release, loc__gte=11).count()
    if big:
        assert f'0.0% <span class="ci">(0/{big})</span>' in body


def test_with_versus_without_paper_pairs(client, release):
    both = model("both")
    evaluate(release, both, lambda s: True, with_paper=True)
    evaluate(release, both, lambda s: s.loc <= 2, with_paper=False)
    evaluate(release, model("single"), lambda s: True)
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "ablation"}).content.decode()
    section = body.split('id="breakdown"')[1]
    without = RunScore.objects.get(run__model=both, run__with_paper=False, paper=None, split="").scaled_pass_rate
    assert f"+{100 - without:.1f} pts" in section
    assert ">Single<" not in section


def test_contamination_keeps_only_papers_after_the_cutoff(client, release):
    # Demo papers' code first commits: dampnest 2025-01-20, topk-attention-pool 2025-04-28, trimmed-infonce 2025-08-04.
    evaluate(release, model("late", knowledge_cutoff=date(2025, 3, 1)), lambda s: s.task.paper.slug != "dampnest")
    evaluate(release, model("nodate"), lambda s: True)
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "contamination"}).content.decode()
    section = body.split('id="breakdown"')[1]
    late_row = section.split(">Late ")[1].split("</tr>")[0]
    assert "2 of 3" in late_row and "100.0%" in late_row, "dampnest (before the cut-off) is left out"
    overall = RunScore.objects.get(run__model__name="late", paper=None, split="").scaled_pass_rate
    assert f"{overall:.1f}%" in late_row and overall < 100
    assert "cut-off unknown" in section.split(">Nodate ")[1].split("</tr>")[0]


def test_leaderboard_queries_stay_bounded(client, release, django_assert_max_num_queries):
    def count_queries(view):
        cache_empty()  # ranks are cached: a second view of the same rows reads less
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(reverse("leaderboard", args=["1.0.0"]), {"view": view}).status_code == 200
        return len(ctx.captured_queries)

    for i in range(2):
        evaluate(release, model(f"m{i}", knowledge_cutoff=date(2025, 1, 1)), lambda s: s.loc % 2 == 0)
    few = {view: count_queries(view) for view in ("papers", "sizes", "ablation", "contamination")}
    for i in range(2, 8):
        evaluate(
            release, model(f"m{i}", knowledge_cutoff=date(2025, 1, 1)), lambda s: s.loc % 3 == 0, with_paper=bool(i % 2)
        )
    assert max(few.values()) <= 8, few
    for view, queries in few.items():
        cache_empty()
        with django_assert_max_num_queries(queries):
            client.get(reverse("leaderboard", args=["1.0.0"]), {"view": view})
        assert count_queries(view) == queries


def test_model_page_never_shows_the_api_key(client, release):
    entry = services.model_register(
        name="keyed",
        display_name="Keyed",
        litellm_model="openai/keyed-1",
        api_key="sk-super-secret-123",
        organization="Keyco",
    )
    run = evaluate(release, entry, lambda s: True)
    body = client.get(reverse("model-detail", args=["keyed"])).content.decode()
    assert "openai/keyed-1" in body and "Keyco" in body and reverse("run-detail", args=[run.pk]) in body
    assert "sk-super-secret-123" not in body and entry.api_key_encrypted not in body


def test_run_page_shows_public_answers_and_never_held_out_items(client, release, maintainer):
    held = release.memberships.get(task__paper__slug="dampnest")
    VersionTask.objects.filter(pk=held.pk).update(split=VersionTask.Split.HELD_OUT)
    run = evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    per_paper_rows_link_the_papers_each_viewer_may_see(client, release, run, maintainer)
    client.logout()
    html = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    body = html + page_text(html)
    held = Snippet.objects.filter(task__versions=release, task__paper__slug="dampnest")
    assert f"{held.count()} held-out items not listed" in body
    assert "covers the held-out split too: its held-out items are private" in page_text(html)
    assert 'id="run-progress"' in body and 'hx-trigger="every 2s"' not in body
    for snippet in Snippet.objects.filter(task__versions=release, loc__gte=3).select_related("task__paper"):
        if snippet.task.paper.slug == "dampnest":
            assert code_line(snippet) not in body and f"answer_{snippet.pk} = 1" not in body
        else:
            assert f"answer_{snippet.pk} = 1" in body
    public = Snippet.objects.filter(task__versions=release, loc__gte=3).exclude(task__paper__slug="dampnest").first()
    assert code_line(public) in body


def per_paper_rows_link_the_papers_each_viewer_may_see(client, release, run, maintainer) -> None:
    """Walk 4: the leaderboard's per-paper table and a run's per-paper rows named papers without linking their pages.
    Each paper listed links its page; the held-out one (dampnest) is listed, and linked, for maintainers only: the
    visibility rule that lists a paper (papers_visible) is the one that opens its page."""
    public = sorted(set(release.tasks.exclude(paper__slug="dampnest").values_list("paper__slug", flat=True)))
    held = reverse("paper-detail", args=["1.0.0", "dampnest"])
    for viewer in (None, maintainer):
        if viewer:
            client.force_login(viewer)
        board = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "papers"}).content.decode()
        heat = board.split('class="heatmap"')[1].split("</thead>")[0]
        scores = client.get(reverse("run-detail", args=[run.pk])).content.decode().split("<h2>Scores</h2>")[1]
        for slug in public:
            url = reverse("paper-detail", args=["1.0.0", slug])
            assert f'href="{url}">{slug}</a>' in heat and f'href="{url}">' in scores, slug
        assert (held in heat and held in scores) == (viewer is not None)
        assert client.get(held).status_code == (200 if viewer else 404)


def test_a_run_page_never_says_a_release_without_held_out_items_has_private_ones(client, release):
    run = evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    assert run.covers_held_out  # the platform's own model is trusted with held-out prompts
    text = page_text(client.get(reverse("run-detail", args=[run.pk])).content.decode())
    assert "held-out items are private" not in text and "its release has no held-out item" in text


def code_line(snippet) -> str:
    """The snippet's first line of code (not a marker comment), as a reader of the page sees it."""
    return next(
        ln.strip() for ln in snippet.reference_code.splitlines() if ln.strip() and not ln.strip().startswith("#")
    )


def test_running_run_polls_its_progress_partial(client, release):
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f'hx-get="{reverse("run-progress", args=[run.pk])}?shown=0"' in body and 'hx-trigger="every 2s"' in body
    partial = client.get(
        reverse("run-progress", args=[run.pk]), {"shown": 0}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "<html" not in partial and f"0 of {run.total_items} items" in partial
    # What changes with the progress comes along out of band: the start, and the items once more have an outcome.
    assert '<span id="run-started" hx-swap-oob="true">' in partial and 'id="run-items"' not in partial
    partial = client.get(reverse("run-progress", args=[run.pk]), {"shown": 3}, headers={"HX-Request": "true"})
    assert '<section id="run-items" aria-labelledby="run-items-title" hx-swap-oob="true">' in partial.content.decode()
    assert "HX-Refresh" not in partial
    # A run that stopped reloads the page its poll is on: its scores, items and buttons changed with it.
    finished = evaluate(release, model("finished-poll"), lambda s: True)
    partial = client.get(reverse("run-progress", args=[finished.pk]), headers={"HX-Request": "true"})
    assert partial["HX-Refresh"] == "true"


def test_nav_leaderboard_link_goes_to_the_latest_release(client, release):
    assert 'href="/leaderboard/"' in client.get(reverse("home")).content.decode()
    response = client.get(reverse("leaderboard-latest"))
    assert response.status_code == 302 and response["Location"] == reverse("leaderboard", args=["1.0.0"])


def test_size_tab_with_an_empty_bucket_renders(client, release):
    """A run with no scored item in a size bucket shows a neutral cell (the heat filter used to receive '')."""
    run = evaluate(release, model("small-scored"), lambda s: True)
    run.outcomes.filter(snippet__loc__gt=2).delete()
    run_scores_store(run=run)
    response = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "sizes"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "background: #f6f8fa" in body and '<td class="num" style="background: #f6f8fa">—</td>' in body


def test_size_tab_reads_the_stored_aggregates_not_the_outcomes(client, release, django_assert_max_num_queries):
    """Each run's size buckets are stored with its scores: the tab shows them though the outcomes are gone, and its
    queries do not grow with the number of runs."""
    run = evaluate(release, model("sized"), lambda s: s.loc <= 2)
    overall = run.scores.get(paper__isnull=True, split="")
    small = overall.size_buckets["1-2"]
    assert small["items"] == small["passed"] > 0 and all(
        cell["passed"] == 0 for label, cell in overall.size_buckets.items() if label != "1-2"
    )
    run.outcomes.all().delete()
    body = client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "sizes"}).content.decode()
    assert f'100.0% <span class="ci">({small["passed"]}/{small["items"]})</span>' in body
    with django_assert_max_num_queries(12) as few:
        client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "sizes"})
    queries = len(few.captured_queries)  # read now: the next request empties the connection's query log
    for n in range(3):
        evaluate(release, model(f"more-{n}"), lambda s: True)
    client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "sizes"})  # whatever the page caches, cached again
    with django_assert_max_num_queries(queries):
        client.get(reverse("leaderboard", args=["1.0.0"]), {"view": "sizes"})


def test_the_upgrade_stores_size_buckets_of_scores_stored_before(release):
    import importlib

    from django.apps import apps

    run = evaluate(release, model("older"), lambda s: s.loc > 2)
    expected = dict(run.scores.filter(paper__isnull=True).values_list("split", "size_buckets"))
    assert expected[""] and expected["public"]
    RunScore.objects.filter(run=run).update(size_buckets={})
    importlib.import_module("evaluation.migrations.0013_run_score_size_buckets").forwards(apps, None)
    assert dict(run.scores.filter(paper__isnull=True).values_list("split", "size_buckets")) == expected
