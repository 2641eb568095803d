"""Flagged outcomes: counted as not passed until a maintainer reviews them (a flag never raises a score), shown
with their evidence to maintainers only,
reviewed through a POST action (CSRF-protected, maintainers only), counted on the leaderboard."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import AWAITING_REVIEW_SAID, EvaluationRun, ModelEntry, Outcome, RunScore
from evaluation.outcomes import Verdict, outcome_flag

pytestmark = pytest.mark.django_db
EVIDENCE = "opens 'optimizer_ref.py' (hidden file)"


@pytest.fixture
def run(release):
    """A completed run: every item passed by the test, the first three flagged by the audit."""
    model = ModelEntry.objects.create(name="sly", display_name="Sly", litellm_model="openai/sly")
    run = services.run_start(model=model, version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippets = list(Snippet.objects.filter(task__versions=release).order_by("pk"))
    for index, snippet in enumerate(snippets):
        verdict = Verdict("passed", "", "")
        if index < 3:
            verdict = outcome_flag(verdict, [{"kind": "hidden", "line": 12, "detail": EVIDENCE, "source": "runtime"}])
        generation = services.generation_record(
            run=run, snippet=snippet, sample=0, prompt="p", raw_answer="```python\nx = 1\n```"
        )
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    return EvaluationRun.objects.get(pk=run.pk)


def overall(run) -> RunScore:
    return RunScore.objects.get(run=run, paper=None, split="")


def test_a_flagged_outcome_counts_as_not_passed(run):
    flagged = Outcome.objects.filter(run=run, status="flagged")
    assert flagged.count() == 3
    assert set(flagged.values_list("measured_status", flat=True)) == {"passed"}
    score = overall(run)
    # 33 items rated: the three under review count as not passed until a maintainer clears them.
    assert (score.items, score.passed, score.failed, score.errors, score.flagged) == (33, 30, 0, 0, 3)
    assert score.pass_rate == pytest.approx(100 * 30 / 33)
    assert score.scaled_pass_rate < 100.0
    assert sum(s.flagged for s in RunScore.objects.filter(run=run, paper__isnull=False)) == 3


def test_confirming_fails_the_item_and_rescores_the_run(run, maintainer):
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    services.outcome_review(outcome=outcome, reviewer=maintainer, decision="confirmed")
    outcome.refresh_from_db()
    assert (outcome.status, outcome.category, outcome.review, outcome.reviewed_by) == (
        "failed",
        "tampering",
        "confirmed",
        maintainer,
    )
    score = overall(run)
    assert (score.passed, score.failed, score.flagged) == (30, 1, 2)
    assert score.pass_rate == pytest.approx(100 * 30 / 33)


def test_clearing_restores_the_measured_verdict_and_moves_the_score(run, admin):
    before = overall(run).pass_rate
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    services.outcome_review(outcome=outcome, reviewer=admin, decision="cleared")
    outcome.refresh_from_db()
    assert (outcome.status, outcome.review) == ("passed", "cleared")
    assert outcome.findings, "the evidence stays on record"
    assert (overall(run).passed, overall(run).flagged) == (31, 2)
    assert overall(run).pass_rate == pytest.approx(100 * 31 / 33)
    assert overall(run).pass_rate > before


def test_a_model_that_flags_its_unsolved_items_scores_what_it_solved(release, maintainer):
    """The attack (issue 33): solve one paper's items, answer every other item with a wrong body the audit flags
    (`import os`). Were flags left out of the denominator, the model would score 100%."""
    from benchmarks.paper2code import ItemResult, score

    model = ModelEntry.objects.create(name="gamer", display_name="Gamer", litellm_model="openai/gamer")
    run = services.run_start(model=model, version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    snippets = list(Snippet.objects.filter(task__versions=release).select_related("task").order_by("pk"))
    solved_task = snippets[0].task_id
    for snippet in snippets:
        if snippet.task_id == solved_task:
            verdict = Verdict("passed", "", "")
        else:
            finding = {"kind": "import", "line": 3, "detail": "imports os", "source": "static"}
            verdict = outcome_flag(Verdict("failed", "wrong_result", ""), [finding])
        generation = services.generation_record(run=run, snippet=snippet, sample=0, prompt="p", raw_answer="x")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    outcomes = Outcome.objects.filter(run=run)
    solved = outcomes.filter(status="passed").count()
    assert 0 < solved < len(snippets) and outcomes.filter(status="flagged").count() == len(snippets) - solved
    # The attack works under the old rule: with the flagged items out of the rating, the model scores 100%.
    results = [ItemResult(str(o.snippet_id), o.snippet.loc, 0, o.status) for o in outcomes.select_related("snippet")]
    unflagged = score(r for r in results if r.status != "flagged")
    assert unflagged.pass_rate == 100.0 and unflagged.scaled_pass_rate == 100.0
    # The platform scores what it solved, in every figure of the row.
    row = overall(run)
    assert row.pass_rate == pytest.approx(100 * solved / len(snippets))
    assert row.scaled_pass_rate < 100.0 and row.pass_rate_ci_high < 100.0 and row.scaled_ci_high < 100.0
    for paper_row in RunScore.objects.filter(run=run, paper__isnull=False):
        assert paper_row.pass_rate == (100.0 if paper_row.paper_id == snippets[0].task.paper_id else 0.0)
    # A maintainer's review moves the score: clearing one flagged item raises it, confirming another does not.
    flagged = list(outcomes.filter(status="flagged").order_by("pk")[:2])
    services.outcome_review(outcome=flagged[0], reviewer=maintainer, decision="confirmed")
    assert overall(run).pass_rate == pytest.approx(100 * solved / len(snippets))
    Outcome.objects.filter(pk=flagged[1].pk).update(measured_status="passed")
    services.outcome_review(outcome=flagged[1], reviewer=maintainer, decision="cleared")
    assert overall(run).pass_rate == pytest.approx(100 * (solved + 1) / len(snippets))


def test_review_refusals(run, author, maintainer):
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    with pytest.raises(services.EvaluationError, match="only maintainers"):
        services.outcome_review(outcome=outcome, reviewer=author, decision="cleared")
    with pytest.raises(services.EvaluationError, match="unknown review decision"):
        services.outcome_review(outcome=outcome, reviewer=maintainer, decision="passed")
    services.outcome_review(outcome=outcome, reviewer=maintainer, decision="confirmed")
    with pytest.raises(services.EvaluationError, match="is not flagged"):
        services.outcome_review(outcome=outcome, reviewer=maintainer, decision="cleared")
    passed = Outcome.objects.filter(run=run, status="passed").first()
    with pytest.raises(services.EvaluationError, match="is not flagged"):
        services.outcome_review(outcome=passed, reviewer=maintainer, decision="confirmed")


def test_evidence_is_for_maintainers_only(run, client, author, maintainer):
    url = reverse("run-detail", args=[run.pk])
    for who in (None, author):
        if who:
            client.force_login(who)
        body = client.get(url).content.decode()
        assert "3 awaiting review</span>" in body
        assert "hidden file" not in body and "outcome-review" not in body and 'id="flags"' not in body
    client.force_login(maintainer)
    body = client.get(url).content.decode()
    assert 'id="flags"' in body and "Flagged items (3: 3 awaiting review)" in body
    assert "opens &#x27;optimizer_ref.py&#x27; (hidden file)" in body
    assert body.count('name="decision" value="confirmed"') == 3


def test_the_review_action_is_a_maintainers_csrf_protected_post(run, author, maintainer):
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    url = reverse("outcome-review", args=[run.pk, outcome.pk])
    anonymous = Client()
    assert anonymous.post(url, {"decision": "cleared"}).status_code == 302  # to the login page
    other = Client()
    other.force_login(author)
    assert other.post(url, {"decision": "cleared"}).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(maintainer)
    assert strict.post(url, {"decision": "cleared"}).status_code == 403, "no CSRF token, no review"
    staff = Client()
    staff.force_login(maintainer)
    assert staff.get(url).status_code == 405
    wrong_run = reverse("outcome-review", args=[run.pk + 1000, outcome.pk])
    assert staff.post(wrong_run, {"decision": "cleared"}).status_code == 404
    outcome.refresh_from_db()
    assert outcome.status == "flagged", "nothing above changed it"
    response = staff.post(url, {"decision": "confirmed"})
    assert response.status_code == 302 and response["Location"].endswith("#flags")
    outcome.refresh_from_db()
    assert (outcome.status, outcome.reviewed_by) == ("failed", maintainer)


def test_maintainers_find_every_flagged_answer_awaiting_review_on_one_queue(run, client, maintainer, monkeypatch):
    """Across runs, newest first, paginated; each row names its run, model, release, paper and snippet, what flagged
    it and when, and links the item and its review; the navigation and the Review page give the count. A review
    takes the answer off the queue."""
    from evaluation.judging.verdict import REPLAY_DISAGREES
    from evaluation.selectors import reviews

    flagged = list(Outcome.objects.filter(run=run, status="flagged").order_by("pk"))
    replayed = {"kind": REPLAY_DISAGREES, "line": None, "detail": "call 1: out[0] differs by 0.5", "source": "replay"}
    Outcome.objects.filter(pk=flagged[0].pk).update(findings=[*flagged[0].findings, replayed])
    # The last flagged answer is the newest: it heads the queue.
    Outcome.objects.filter(pk=flagged[2].pk).update(created_at=flagged[0].created_at + timedelta(hours=1))
    client.force_login(maintainer)
    body = client.get(reverse("flag-queue")).content.decode()
    assert "Flagged answers awaiting review (3)" in body
    rows = re.findall(r'data-flagged-outcome="(\d+)"', body)
    assert rows[0] == str(flagged[2].pk) and set(rows) == {str(o.pk) for o in flagged}
    assert reverse("run-item", args=[run.pk, flagged[0].pk]) in body
    assert f"{reverse('run-item', args=[run.pk, flagged[0].pk])}#flag-{flagged[0].pk}" in body
    assert "Sly" in body and run.version.name in body and flagged[0].snippet.name in body
    assert "hidden, sealed-replay" in body and "call 1: out[0] differs by 0.5" in body
    assert "(the tests said: passed)" in body
    home = client.get(reverse("review-queue")).content.decode()
    assert ">Flags</a>" in home
    assert re.search(r'data-testid="flags-awaiting">Flagged answers awaiting review: <a href="[^"]+">3</a>', home)

    monkeypatch.setattr(reviews, "FLAG_QUEUE_ITEMS", 2)
    second = client.get(reverse("flag-queue"), {"page": 2}).content.decode()
    assert re.findall(r'data-flagged-outcome="(\d+)"', second) == [str(flagged[0].pk)]

    services.outcome_review(outcome=flagged[2], reviewer=maintainer, decision="cleared")
    body = client.get(reverse("flag-queue")).content.decode()
    assert "Flagged answers awaiting review (2)" in body and f'data-flagged-outcome="{flagged[2].pk}"' not in body


def test_a_maintainer_reviews_a_flagged_answer_on_its_item_page(run, client, author, maintainer):
    """The queue links each answer's item page: there a maintainer reads the evidence and reviews it, and comes back
    to the item; its owner reads no evidence and gets no form."""
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    url = reverse("run-item", args=[run.pk, outcome.pk])
    client.force_login(author)
    body = client.get(url).content.decode()
    assert 'name="decision"' not in body and "hidden file" not in body
    client.force_login(maintainer)
    body = client.get(url).content.decode()
    assert f'id="flag-{outcome.pk}"' in body and "(hidden file)" in body
    assert 'name="return_to" value="item"' in body and 'name="decision" value="confirmed"' in body
    response = client.post(
        reverse("outcome-review", args=[run.pk, outcome.pk]), {"decision": "confirmed", "return_to": "item"}
    )
    assert response.status_code == 302 and response["Location"] == url
    body = client.get(url).content.decode()
    assert 'name="decision"' not in body and 'data-testid="flag-review"' in body


def test_the_flag_queue_is_for_maintainers_only(run, author):
    url = reverse("flag-queue")
    assert Client().get(url).status_code == 302  # to the login page
    other = Client()
    other.force_login(author)
    assert other.get(url).status_code == 403
    assert ">Flags</a>" not in other.get(reverse("my-runs")).content.decode(), "not in a non-maintainer's navigation"


def test_the_leaderboard_shows_a_rows_flag_count(run, client, release):
    default = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert ">3 awaiting review</span>" in default, "beside the score, without asking for the column"
    # Flags are behind the column toggle since issue 22 (the key columns fit a laptop screen): asked for by cols=.
    body = client.get(reverse("leaderboard", args=[release.name]), {"cols": "flagged"}).content.decode()
    assert ">Awaiting review</a>" in body
    assert (
        'title="Items awaiting a maintainer&#x27;s review (flagged answers, infrastructure errors after an '
        "agent&#x27;s commands), counted as not passed until reviewed; a flag on an answer whose tests failed awaits "
        'none (it counts as failed)">3</span>'
    ) in body


def test_the_leaderboard_shows_a_models_measured_test_gaming(run, client, release):
    """Items whose tests passed while the sealed replay disagreed, counted per row (what was measured, reviewed or
    not) and as a share of its items."""
    from evaluation.judging.verdict import REPLAY_DISAGREES

    replayed = {"kind": REPLAY_DISAGREES, "line": None, "detail": "call 1: differs", "source": "replay"}
    flagged = list(Outcome.objects.filter(run=run, status="flagged").order_by("pk"))
    for outcome in flagged[:2]:
        Outcome.objects.filter(pk=outcome.pk).update(findings=[*outcome.findings, replayed])
    from evaluation.scoring import run_scores_store

    run_scores_store(run=run)  # stored with the run's aggregates: no page reads outcomes for it
    assert overall(run).test_gaming == 2
    body = client.get(reverse("leaderboard", args=[release.name]), {"cols": "test_gaming"}).content.decode()
    assert ">Test gaming</a>" in body
    assert f'2 <span class="muted">({100 * 2 / 33:.1f}%)</span>' in body
    rows = client.get(reverse("api-leaderboard", args=[release.name])).json()
    assert sorted(row["test_gaming"] for row in rows)[-1] == 2 and sum(row["test_gaming"] for row in rows) == 2


def test_a_failed_answer_keeps_the_rules_research_code_trips_as_notes_and_is_flagged_by_the_rest():
    # A newcomer's walk: a wrong body of Muon's in-place momentum update came back "Flagged (tampering)" for its
    # input-mutation lines, so every wrong answer of such a snippet would wait in the review queue as tampering.
    from evaluation.judging.verdict import FAILED_NOTE, tests_verdict

    failed = Verdict("failed", "wrong_result", "2 of 6 tests failed")
    in_place = {"kind": "tampering", "rule": "input-mutation", "line": 50, "detail": "buf.lerp_", "source": "static"}
    verdict = tests_verdict(failed, [in_place])
    assert (verdict.status, verdict.category) == ("failed", "wrong_result")
    assert verdict.findings == ({**in_place, "note": FAILED_NOTE},)
    runtime = {"kind": "tampering", "line": 51, "detail": "assert_allclose replaced", "source": "runtime"}
    flagged = tests_verdict(failed, [in_place, runtime])
    assert (flagged.status, flagged.measured) == ("flagged", "failed")
    assert flagged.findings == (runtime, {**in_place, "note": FAILED_NOTE})
    passed = Verdict("passed", "", "")  # no replay to hold it: the finding flags it, as before
    assert tests_verdict(passed, [in_place]).status == "flagged" == outcome_flag(passed, [in_place]).status


def test_a_flag_on_an_answer_whose_tests_failed_shows_on_its_page_and_awaits_no_review(release, client, maintainer):
    """A failed item scores 0 whatever a review says: its flag shows on the item's page, but the review queue, its
    count and the leaderboard's and the run's "awaiting review" hold only the flag on an answer whose tests passed."""
    from evaluation.selectors.items import run_progress

    model = ModelEntry.objects.create(name="mixed", display_name="Mixed", litellm_model="openai/mixed")
    run = services.run_start(model=model, version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    finding = {"kind": "hidden", "line": 12, "detail": EVIDENCE, "source": "runtime"}
    tests_said = {0: Verdict("passed", "", ""), 1: Verdict("failed", "wrong_result", "2 of 6 tests failed")}
    for index, snippet in enumerate(Snippet.objects.filter(task__versions=release).order_by("pk")):
        verdict = outcome_flag(tests_said[index], [finding]) if index in tests_said else Verdict("passed", "", "")
        generation = services.generation_record(
            run=run, snippet=snippet, sample=0, prompt="p", raw_answer="```python\nx = 1\n```"
        )
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    passed, failed = Outcome.objects.filter(run=run, status="flagged").order_by("pk")
    assert (passed.measured_status, failed.measured_status) == ("passed", "failed")
    assert passed.awaiting_review and not failed.awaiting_review

    client.force_login(maintainer)
    queue = client.get(reverse("flag-queue")).content.decode()
    assert "Flagged answers awaiting review (1)" in queue
    assert re.findall(r'data-flagged-outcome="(\d+)"', queue) == [str(passed.pk)]
    home = client.get(reverse("review-queue")).content.decode()
    assert re.search(r'data-testid="flags-awaiting">Flagged answers awaiting review: <a href="[^"]+">1</a>', home)

    item = client.get(reverse("run-item", args=[run.pk, failed.pk])).content.decode()
    # Its badge says failed, as it counts (walk48 read "Flagged" first on an answer that failed its tests).
    assert '<span class="badge failed">Failed (flagged)</span>' in item and 'data-testid="item-flag"' in item
    assert 'data-testid="flag-not-held"' in item and "until a maintainer reviews it" not in item
    assert "(hidden file)" in item, "what flagged it is still there to read"
    held = client.get(reverse("run-item", args=[run.pk, passed.pk])).content.decode()
    assert "Flagged for review</h2>" in held and 'data-testid="flag-not-held"' not in held
    assert '<span class="badge flagged">Flagged</span>' in held
    run_page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert run_page.count('<span class="badge failed">Failed (flagged)</span>') == 2  # its item row and its flag

    score = overall(run)
    assert (score.passed, score.failed, score.flagged) == (31, 1, 1), "not passed either way; one awaits review"
    assert score.categories == {"passed": 31, "wrong_result": 1, "flagged": 1}
    assert run_progress(run).flagged == 1
    board = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert ">1 awaiting review</span>" in board


def test_runs_stored_with_a_failed_answers_flag_awaiting_review_are_rescored(run, maintainer):
    """A run whose aggregates were stored when every flag awaited review (a failed answer's among them) is rescored
    by the migration: the item counts as failed, no longer as awaiting review; its pass rate does not move."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("evaluation.migrations.0040_outcome_awaiting_review_tests_failed")
    outcome = Outcome.objects.filter(run=run, status="flagged").first()
    Outcome.objects.filter(pk=outcome.pk).update(measured_status="failed", category="wrong_result")
    # As stored under the old rule: the three flags awaiting review.
    assert (overall(run).failed, overall(run).flagged) == (0, 3)
    rate = overall(run).pass_rate
    migration.runs_with_failed_flags_rescored(apps, None)
    assert (overall(run).failed, overall(run).flagged, overall(run).pass_rate) == (1, 2, rate)
    assert overall(run).categories == {"passed": 30, "wrong_result": 1, "flagged": 2}
    assert sum(s.flagged for s in RunScore.objects.filter(run=run, paper__isnull=False)) == 2


def failed_flag(run) -> Outcome:
    """One of the run's flags made a flag on an answer whose tests failed (it awaits no review), the run rescored."""
    from evaluation.scoring import run_scores_store

    outcome = Outcome.objects.filter(run=run, status="flagged").order_by("pk").first()
    Outcome.objects.filter(pk=outcome.pk).update(measured_status="failed", category="wrong_result")
    run_scores_store(run=run)
    return Outcome.objects.get(pk=outcome.pk)


def test_the_run_page_and_the_leaderboard_say_their_count_is_of_items_awaiting_review(run, client, maintainer):
    """Last session's walk: the run page's scores had a "Flagged" column counting only the flags awaiting review, read
    as every flag. Its header, the progress and the leaderboard's column say "Awaiting review", with what that counts;
    the maintainers' list of the run's flags gives both counts."""
    failed_flag(run)
    client.force_login(maintainer)
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    said = AWAITING_REVIEW_SAID.replace("'", "&#x27;")
    assert f'<th scope="col" class="num" title="{said}">Awaiting review</th>' in page
    assert ">Flagged</th>" not in page
    assert f'<span title="{said}">2 awaiting review</span>' in page, "the progress"
    assert "Flagged items (3: 2 awaiting review)" in page
    totals = re.search(r"<tfoot>.*?All items.*?</tr>", page, flags=re.S).group(0)
    assert re.findall(r'<td class="num">(\d+)</td>', totals)[:4] == ["33", "30", "0", "2"], "items, passed, errors"
    board = client.get(reverse("leaderboard", args=[run.version.name]), {"cols": "flagged"}).content.decode()
    assert f'data-column="flagged" title="{said}">' in board and ">Awaiting review</a>" in board
    assert ">2 awaiting review</span>" in board and ">Flags</a></th>" not in board


def test_a_flag_on_a_failed_answer_offers_no_review(run, client, maintainer):
    """Last session's walk: the Confirm/Clear form was shown on a flag whose answer failed its tests, where either
    decision leaves the item failed (models.AWAITING_REVIEW). The flag and its evidence stay; the form gives way to
    why no review is needed, on the run's list of flags and on the item's page; a flag awaiting review keeps it."""
    failed = failed_flag(run)
    held = Outcome.objects.filter(run=run, status="flagged", measured_status="passed").first()
    client.force_login(maintainer)
    run_page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    item_page = client.get(reverse("run-item", args=[run.pk, failed.pk])).content.decode()
    for page in (run_page, item_page):
        section = re.search(rf'<section class="flag" id="flag-{failed.pk}">.*?</section>', page, flags=re.S).group(0)
        assert "No review needed: the answer failed its tests" in section
        assert "<form" not in section and 'value="confirmed"' not in section
        assert EVIDENCE.replace("'", "&#x27;") in section, "what flagged it is still there to read"
    section = re.search(rf'<section class="flag" id="flag-{held.pk}">.*?</section>', run_page, flags=re.S).group(0)
    assert 'value="confirmed"' in section and "No review needed" not in section
