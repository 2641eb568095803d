"""Reported results: a benchmark's published per-snippet results (overall_stats.json layout) become one reported run
per model, scored like every run, shown on the leaderboard with their source and never as verified; anything that
does not match the release is refused with the full list and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, Outcome, RunScore
from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db
FIXTURE = Path(__file__).parent / "fixtures" / "overall_stats.json"
SOURCE = "Table 2 of the fictional paper, https://example.org/fictional-results"


def imported(tmp_path, document, **options) -> None:
    path = tmp_path / "overall_stats.json"
    path.write_text(json.dumps(document))
    call_command("import_results", str(path), version="1.0.0", **options)


def test_scores_equal_a_hand_computation(release, capsys):
    call_command("import_results", str(FIXTURE), version="1.0.0", source=SOURCE)
    # By hand, from the fixture: lines of code per paper are dampnest 48 (12 snippets), topk-attention-pool 31 (11),
    # trimmed-infonce 30 (10): 109 lines over 33 snippets.
    # Model-A (one completion) passes dampnest but its 18-line update rule (11 snippets, 30 lines) and the 14-line
    # topk forward pass: 12 of 33 snippets, 44 of 109 lines.
    a = RunScore.objects.get(run__model__name="model-a-2025", paper__isnull=True, split="")
    assert (a.items, a.passed, a.failed, a.errors) == (33, 12, 21, 0)
    assert a.pass_rate == pytest.approx(100 * 12 / 33)
    assert a.scaled_pass_rate == pytest.approx(100 * 44 / 109)
    assert a.pass_rate_std == a.scaled_pass_rate_std == 0
    dampnest = RunScore.objects.get(run=a.run, paper__slug="dampnest")
    assert (dampnest.pass_rate, dampnest.scaled_pass_rate) == (pytest.approx(100 * 11 / 12), pytest.approx(62.5))
    trimmed = RunScore.objects.get(run=a.run, paper__slug="trimmed-infonce")
    assert (trimmed.pass_rate, trimmed.scaled_pass_rate) == (0, 0)
    # model-b, two completions: the first passes everything, the second only trimmed-infonce (10 snippets, 30
    # lines); pass@1 is the mean over completions, as for every run with samples.
    b = RunScore.objects.get(run__model__name="model-b", paper__isnull=True, split="")
    assert b.run.samples == 2 and (b.passed, b.failed) == (33 + 10, 23)
    assert b.pass_rate == pytest.approx((100 + 100 * 10 / 33) / 2)
    assert b.scaled_pass_rate == pytest.approx((100 + 100 * 30 / 109) / 2)
    assert b.pass_rate_std == pytest.approx((100 - 100 * 10 / 33) / 2)
    # pass@k with n = 2 completions: pass@1 is c/n per snippet, pass@2 is 1 when any passed.
    assert b.pass_at_k["pass@k"] == {"1": pytest.approx((33 + 10) / 66 * 100), "2": pytest.approx(100.0)}
    for score in (a, b):
        assert score.scaled_ci_low <= score.scaled_pass_rate <= score.scaled_ci_high
        assert score.pass_rate_ci_low <= score.pass_rate <= score.pass_rate_ci_high
        assert score.cost is None and score.prompt_tokens is None  # published results say nothing of cost or tokens
        assert score.run.provenance == EvaluationRun.Provenance.REPORTED and score.run.source == SOURCE
        assert score.run.status == EvaluationRun.Status.COMPLETED
    assert ModelEntry.objects.get(name="model-a-2025").display_name == "Model-A (2025)"
    assert "Model-A (2025) (reported) scaled pass@1 40.4%" in capsys.readouterr().out


def test_scored_by_the_same_code_as_a_verified_run(release):
    """A platform run with the same outcomes gets the same aggregates, intervals included."""
    from tests.leaderboard.test_leaderboard import evaluate, model

    call_command("import_results", str(FIXTURE), version="1.0.0")
    reported = RunScore.objects.get(run__model__name="model-a-2025", paper__isnull=True, split="")
    passes = set(Outcome.objects.filter(run=reported.run, status="passed").values_list("snippet_id", flat=True))
    verified = evaluate(release, model("same"), lambda s: s.pk in passes)
    # The bootstrap is seeded by the run id: rescore the verified run's items under the reported run's seed.
    from evaluation.scoring import bootstrap_ci, run_item_results

    rate_ci, scaled_ci = bootstrap_ci(run_item_results(verified)[None], seed=reported.run.pk)
    mine = verified.scores.get(paper__isnull=True, split="")
    fields = ("items", "passed", "failed", "errors", "pass_rate", "scaled_pass_rate")
    assert [getattr(mine, f) for f in fields] == [getattr(reported, f) for f in fields]
    assert (rate_ci.low, rate_ci.high, scaled_ci.low, scaled_ci.high) == (
        reported.pass_rate_ci_low,
        reported.pass_rate_ci_high,
        reported.scaled_ci_low,
        reported.scaled_ci_high,
    )


def test_leaderboard_shows_reported_rows_with_their_source_never_verified(release, client, maintainer):
    call_command("import_results", str(FIXTURE), version="1.0.0", source=SOURCE)
    body = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    table = body.split('id="leaderboard-table"')[1].split("</table>")[0]
    rows = [row for row in table.split("<tr")[1:] if "Model-A (2025)" in row or "Model-B" in row or "model-b" in row]
    assert len(rows) == 2
    for row in rows:
        assert 'class="reported"' in row and ">reported</span>" in row and "fictional-results" in row
        assert "verified" not in row.split('title="')[0]
    records = {r["model"]: r for r in client.get("/api/v1/releases/1.0.0/leaderboard/").json()}
    assert records["model-b"]["provenance"] == "reported" and records["model-b"]["source"] == SOURCE
    run = EvaluationRun.objects.get(model__name="model-b")
    assert SOURCE.split(",")[0] in client.get(reverse("run-detail", args=[run.pk])).content.decode()
    # A maintainer cannot turn published results into verified ones: they were never generated here.
    with pytest.raises(services.EvaluationError, match="only self-reported runs can be verified"):
        services.run_verify(run=run, actor=maintainer, reason="looks right")


def test_refuses_what_does_not_match_with_the_full_list_and_stores_nothing(release, tmp_path):
    document = json.loads(FIXTURE.read_text())
    papers = document["results"]
    papers["no-such-paper"] = {"results": {}}
    snippets = papers["dampnest"]["results"]["model-b"]["results"]
    snippets["a snippet nobody wrote"] = [{"passed": True, "snippet_code_line_count": 1}]
    snippets["dampnest update rule"][1]["snippet_code_line_count"] = 17
    del papers["trimmed-infonce"]["results"]["Model-A (2025)"]["results"]["stable log-sum-exp"]
    papers["topk-attention-pool"]["results"]["model-b"]["results"]["rms-normalise output"][0]["passed"] = "yes"
    with pytest.raises(CommandError) as refused:
        imported(tmp_path, document)
    message = str(refused.value)
    assert "nothing imported, 5 problem(s)" in message
    assert "results['no-such-paper']: no paper 'no-such-paper' in release 1.0.0 (its papers: dampnest, " in message
    assert "no snippet 'a snippet nobody wrote' in paper dampnest (its snippets: bias-correct both moments," in message
    assert (
        """results['dampnest']["results"]['model-b']["results"]['dampnest update rule'][1]: """
        "snippet_code_line_count is 17; release 1.0.0 counts 18 lines"
    ) in message
    assert "model 'Model-A (2025)' has no results for 1 snippet(s) of release 1.0.0: trimmed-infonce/stable" in message
    assert """['rms-normalise output'][0]: expected an object with "passed": true or false""" in message
    assert not EvaluationRun.objects.exists() and not ModelEntry.objects.filter(kind="reported").exists()


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"\xff", "not JSON"),
        (b"[]", 'expected an object with "results"'),
        (b'{"results": {}}', "holds no results"),
        (b'{"results": {"dampnest": []}}', "results['dampnest']: expected"),
    ],
)
def test_refuses_files_not_in_the_layout(release, tmp_path, content, expected):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CommandError, match=expected.replace("[", r"\[").replace("(", r"\(")):
        call_command("import_results", str(path), version="1.0.0")
    assert not EvaluationRun.objects.exists()


def test_refuses_a_draft_an_unknown_release_and_a_second_import(release, tmp_path):
    pset_import(root=DEMO_PSET, version_name="2.0.0-draft")
    with pytest.raises(CommandError, match="is a draft"):
        call_command("import_results", str(FIXTURE), version="2.0.0-draft")
    with pytest.raises(CommandError, match="no release named 'nope'"):
        call_command("import_results", str(FIXTURE), version="nope")
    call_command("import_results", str(FIXTURE), version="1.0.0")
    with pytest.raises(CommandError, match="already has reported results on 1.0.0"):
        call_command("import_results", str(FIXTURE), version="1.0.0")
    assert EvaluationRun.objects.count() == 2


def test_a_reported_run_over_held_out_items_says_they_are_scored_only_in_aggregate(release, client):
    """Published results cover every snippet, held-out ones too: the run page does not call them public only."""
    from benchmarks.models import VersionTask
    from tests.conftest import page_text

    VersionTask.objects.filter(version=release, task__paper__slug="dampnest").update(split=VersionTask.Split.HELD_OUT)
    call_command("import_results", str(FIXTURE), version="1.0.0")
    run = EvaluationRun.objects.get(model__name="model-b")
    text = page_text(client.get(reverse("run-detail", args=[run.pk])).content.decode())
    assert "its held-out items are private" in text and "public split only" not in text
