"""Comparing two runs: page and API show the hand-computed difference, interval and McNemar p-value; held-out
items only count in the release aggregate for non-maintainers; bad input gets a clear error; bounded queries."""

from __future__ import annotations

from math import comb

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.urls import reverse

from benchmarks.models import Snippet, VersionTask
from evaluation.models import ModelEntry
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db

A_PAPERS, B_PAPERS = {"topk-attention-pool", "dampnest"}, {"trimmed-infonce", "dampnest"}


@pytest.fixture
def pair(release):
    a = evaluate(release, model("alpha"), lambda s: s.task.paper.slug in A_PAPERS)
    b = evaluate(release, model("beta"), lambda s: s.task.paper.slug in B_PAPERS)
    snippets = list(Snippet.objects.filter(task__versions=release).select_related("task__paper"))
    loc = {
        p: sum(s.loc for s in snippets if s.task.paper.slug == p)
        for p in ("topk-attention-pool", "trimmed-infonce", "dampnest")
    }
    count = {p: sum(1 for s in snippets if s.task.paper.slug == p) for p in loc}
    return a, b, loc, count


def two_sided(b, c):
    n = b + c
    return min(1.0, 2 * sum(comb(n, k) for k in range(min(b, c) + 1)) / 2**n)


def test_api_numbers_match_the_hand_computed_ones(client, release, pair):
    a, b, loc, count = pair
    data = client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).json()
    overall = data["overall"]
    # Only A passes topk items, only B passes trimmed items, both pass dampnest.
    assert overall["a_only"] == count["topk-attention-pool"] and overall["b_only"] == count["trimmed-infonce"]
    assert overall["items"] == sum(count.values())
    assert overall["difference"] == pytest.approx(
        100 * (loc["topk-attention-pool"] - loc["trimmed-infonce"]) / sum(loc.values())
    )
    assert overall["mcnemar_p"] == pytest.approx(two_sided(count["topk-attention-pool"], count["trimmed-infonce"]))
    # Three papers: all-topk (+100) and all-trimmed (-100) resamples each have probability 1/27 > 2.5%.
    assert (overall["ci_low"], overall["ci_high"]) == (-100.0, 100.0)
    papers = {p["paper"]: p for p in data["papers"]}
    assert (
        overall["papers"] == 3
        and "with 3 papers the interval is little more than the range" in overall["interval_note"]
    )
    topk = papers["topk-attention-pool"]
    # One paper is one cluster: no interval (issue 22 changes the degenerate [100, 100] to none, with the reason).
    assert (topk["difference"], topk["ci_low"], topk["ci_high"]) == (100.0, None, None)
    assert "one paper is a single cluster" in topk["interval_note"]
    assert topk["mcnemar_p"] == pytest.approx(2 / 2 ** count["topk-attention-pool"])
    damp = papers["dampnest"]
    assert (damp["difference"], damp["ci_low"], damp["ci_high"], damp["mcnemar_p"]) == (0.0, None, None, 1.0)
    assert {(i["paper"], i["a"], i["b"]) for i in data["items"]} == {
        ("topk-attention-pool", 1.0, 0.0),
        ("trimmed-infonce", 0.0, 1.0),
        ("dampnest", 1.0, 1.0),
    }
    assert data["items_withheld"] == 0


def test_page_shows_the_same_numbers_and_both_outcomes(client, release, pair):
    a, b, loc, count = pair
    api = client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).json()
    body = client.get(reverse("release-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).content.decode()
    o = api["overall"]
    for value in (o["difference"], o["ci_low"], o["ci_high"]):
        assert f"{value:.2f}" in body
    assert f"{o['mcnemar_p']:.4f}" in body
    assert f'<td class="num">{o["a_only"]}</td><td class="num">{o["b_only"]}</td>' in body
    assert body.count("<tr><td") == len(api["papers"]) + len(api["items"])
    assert "Alpha vs Beta" in body
    # Paper rows: the difference and, instead of an interval, why there is none; the release row warns of few papers.
    assert body.count("no interval<span") == len(api["papers"])
    assert "one paper is a single cluster" in body
    assert 'id="interval-warning"' in body and "with 3 papers the interval is little more than the range" in body


def test_page_names_what_each_interval_resamples(client, release, pair):
    a, b, _, _ = pair
    body = client.get(reverse("release-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).content.decode()
    assert "The leaderboard's intervals resample snippets" in body
    assert "This comparison resamples papers instead, because a paper's snippets share code" in body


def test_enough_papers_get_no_warning():
    from benchmarks.paper2code.comparison import FEW_PAPERS, PairedItem, compare

    items = [PairedItem(item_id=str(i), paper_id=f"p{i}", loc=1, a=float(i % 2), b=0.0) for i in range(FEW_PAPERS)]
    assert compare(items).interval is not None and compare(items).interval_note == ""
    assert "little more than the range" in compare(items[:-1]).interval_note


def test_items_show_marks_and_link_both_runs_item_pages(client, release, pair):
    from evaluation.models import Outcome

    a, b, _, count = pair
    body = client.get(reverse("release-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).content.decode()
    items = body[body.index('id="compare-items"') :]
    assert "1.00" not in items and "0.00" not in items
    total = sum(count.values())
    # Each item: A's mark and B's; a pass is ✓ with "passed" for screen readers, a failure ✗ with "failed".
    passes = count["topk-attention-pool"] + count["trimmed-infonce"] + 2 * count["dampnest"]
    assert items.count('<span aria-hidden="true">✓</span><span class="visually-hidden">passed</span>') == passes
    assert items.count('<span aria-hidden="true">✗</span><span class="visually-hidden">failed</span>') == (
        2 * total - passes
    )
    for run in (a, b):
        outcome = Outcome.objects.filter(run=run, snippet__task__paper__slug="dampnest").order_by("pk").first()
        url = reverse("run-item", args=[run.pk, outcome.pk])
        assert f'href="{url}"' in items
        assert client.get(url).status_code == 200


def test_disagreements_only_lists_the_items_one_run_passes(client, release, pair):
    a, b, _, count = pair
    url = reverse("release-compare", args=[release.name])
    body = client.get(url, {"a": a.pk, "b": b.pk}).content.decode()
    assert f'href="?a={a.pk}&amp;b={b.pk}&amp;items=disagreements#items"' in body  # a plain link: no script needed
    body = client.get(url, {"a": a.pk, "b": b.pk, "items": "disagreements"}).content.decode()
    items = body[body.index('id="compare-items"') :]
    assert "dampnest" not in items  # both pass it
    assert items.count('<tr><td class="fold">topk-attention-pool') == count["topk-attention-pool"]
    assert items.count('<tr><td class="fold">trimmed-infonce') == count["trimmed-infonce"]
    # The statistics stay those of every item.
    assert 'aria-current="page">Disagreements only' in body and "dampnest" in body[: body.index('id="compare-items"')]
    data = client.get(
        reverse("api-compare", args=[release.name]), {"a": a.pk, "b": b.pk, "items": "disagreements"}
    ).json()
    assert data["disagreements_only"] and {i["paper"] for i in data["items"]} == {
        "topk-attention-pool",
        "trimmed-infonce",
    }
    assert data["overall"]["items"] == sum(count.values())


def test_held_out_items_only_in_the_aggregate_for_non_maintainers(client, release, pair):
    a, b, loc, count = pair
    VersionTask.objects.filter(version=release, task__paper__slug="dampnest").update(split=VersionTask.Split.HELD_OUT)
    url = reverse("api-compare", args=[release.name])
    data = client.get(url, {"a": a.pk, "b": b.pk}).json()
    assert data["items_withheld"] == count["dampnest"]
    assert data["overall"]["items"] == sum(count.values())  # still counted in the release aggregate
    assert "dampnest" not in {p["paper"] for p in data["papers"]} | {i["paper"] for i in data["items"]}
    body = client.get(reverse("release-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).content.decode()
    assert "dampnest" not in body
    maintainer = User.objects.create_user("m")
    maintainer.groups.add(Group.objects.get_or_create(name=settings.MAINTAINERS_GROUP)[0])
    client.force_login(maintainer)
    data = client.get(url, {"a": a.pk, "b": b.pk}).json()
    assert data["items_withheld"] == 0 and "dampnest" in {p["paper"] for p in data["papers"]}


@pytest.mark.parametrize(
    "query, message",
    [
        ({"a": "x", "b": "1"}, "?a= must be a run id"),
        ({"a": "1"}, "?b= must be a run id"),
        ({"a": "²", "b": "1"}, "?a= must be a run id"),
        ({"a": "999999", "b": "1"}, "no such run on release"),
    ],
)
def test_bad_queries_get_a_clear_error(client, release, pair, query, message):
    a, b, _, _ = pair
    query = {k: (str(b.pk) if v == "1" else v) for k, v in query.items()}
    response = client.get(reverse("api-compare", args=[release.name]), query)
    assert response.status_code == 400 and message in response.json()["error"]["message"]
    page = client.get(reverse("release-compare", args=[release.name]), query)
    assert page.status_code == 400 and message in page.content.decode()


def test_same_run_and_other_release_are_refused(client, release, pair, media_root):
    from benchmarks.services.psets import pset_import
    from tests.conftest import DEMO_PSET

    a, b, _, _ = pair
    response = client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": a.pk})
    assert response.status_code == 400 and "two different runs" in response.json()["error"]["message"]
    other = pset_import(root=DEMO_PSET, version_name="2.0.0", publish=True).version
    c = evaluate(other, ModelEntry.objects.get(name="alpha"), lambda s: True)
    response = client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": c.pk})
    assert response.status_code == 400 and "no such run on release" in response.json()["error"]["message"]


def test_comparison_queries_are_bounded(client, release, pair, django_assert_max_num_queries):
    a, b, _, _ = pair
    with django_assert_max_num_queries(12):
        client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": b.pk})


def test_leaderboard_offers_the_comparison_of_any_two_rows(client, release, pair):
    a, b, _, _ = pair
    body = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert f'action="{reverse("release-compare", args=[release.name])}"' in body
    assert f'<option value="{a.pk}"' in body and f'<option value="{b.pk}"' in body


def test_an_answer_awaiting_review_compares_as_not_passed(client, release, pair):
    from evaluation.models import Outcome

    a, b, _, count = pair
    flagged = Outcome.objects.filter(run=a, snippet__task__paper__slug="topk-attention-pool").first()
    Outcome.objects.filter(pk=flagged.pk).update(status=Outcome.Status.FLAGGED)
    data = client.get(reverse("api-compare", args=[release.name]), {"a": a.pk, "b": b.pk}).json()
    assert data["overall"]["items"] == sum(count.values())  # as in scoring and ranks: compared, as not passed
    assert data["overall"]["a_only"] == count["topk-attention-pool"] - 1
