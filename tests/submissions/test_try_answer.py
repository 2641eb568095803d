"""Try an answer (issue 35, item 3): on a validated revision, its author or a maintainer tries alternative bodies for a
snippet and gets evaluation's verdict for each (judging/step.py, in the sandbox, on a real worker); the tried answers
stay with the revision, where the review page shows them; a stranger cannot try answers, and tries count against
the user's run quota."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from submissions import services
from submissions.models import TriedAnswer, ValidationReport
from submissions.tasks import revision_validate
from tests.conftest import page_text, polled
from tests.evaluation.corpus.tasks import entries, task, unguarded_run
from tests.test_unique_ids import page_problems

CLIP = "clip damping ratio at rho_max"
SECOND = "second moment of gradients"
STEP = "parameter step with decoupled weight decay"
# Alternatives a reader of the paper could write: each computes what the reference does, another way.
CORRECT = [
    (CLIP, "np.where instead of np.minimum", "rho = np.where(rho > self.rho_max, self.rho_max, rho)\n"),
    (SECOND, "np.square instead of g * g", 'st["v"] = b2 * st["v"] + (1.0 - b2) * np.square(g)\n'),
    (STEP, "the decay as a second term", "new_theta = theta - self.lr * u - self.lr * self.weight_decay * theta\n"),
]
WRONG = [
    (CLIP, "maximum: clips from below", "rho = np.maximum(rho, self.rho_max)\n"),
    (SECOND, "forgets to square the gradient", 'st["v"] = b2 * st["v"] + (1.0 - b2) * g\n'),
]
CORPUS = Path(__file__).parents[1] / "evaluation" / "corpus"
HOSTILE = "skip-through-numpy-testing"  # a test-framework skip: passes under plain python, never here


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def snippet_value(revision, name: str) -> str:
    from submissions.selectors import revision_snippet_choices

    return next(value for value, label in revision_snippet_choices(revision=revision) if label.endswith(name))


def try_answer(client, submission, revision, name: str, body: str, note: str = ""):
    dampnest = task("dampnest")
    return client.post(
        reverse("answer-try", args=[submission.pk]),
        {"try-snippet": snippet_value(revision, name), "try-code": dampnest.indented(name, body), "try-note": note},
    )


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_correct_alternatives_pass_wrong_ones_fail_and_a_hostile_one_is_contained(
    draft, author, maintainer, sandbox, celery_worker_factory, settings
):
    settings.RUNS_ACTIVE_PER_USER = 10
    revision = services.submission_submit(submission=draft, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    assert ValidationReport.objects.get(pk=revision.report.pk).status == "passed"
    revision.refresh_from_db()

    [hostile] = [e for e in entries(CORPUS / "hostile.yaml") if e.name == HOSTILE]
    dampnest = task("dampnest")
    # The attack works with no guard: spliced in and run with plain python, the tests pass.
    assert unguarded_run(dampnest.spliced(hostile.snippet, dampnest.indented(hostile.snippet, hostile.answer)))[0]

    client = client_for(author)
    for name, note, body in [*CORRECT, *WRONG]:
        response = try_answer(client, draft, revision, name, body, note)
        assert response.status_code == 302 and response["Location"].endswith("#tried-answers")
    try_answer(client, draft, revision, hostile.snippet, hostile.answer, "hostile")
    assert TriedAnswer.objects.filter(revision=revision, status="pending").count() == 6

    worker = celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap")
    polled(
        lambda: not TriedAnswer.objects.filter(status__in=TriedAnswer.ACTIVE).exists(),
        timeout=300,
        what="every tried answer judged",
        worker=worker,
    )
    verdicts = {t.note: t for t in TriedAnswer.objects.filter(revision=revision)}
    for _, note, _ in CORRECT:
        assert verdicts[note].status == "passed", (note, verdicts[note].detail)
        assert verdicts[note].tests and all(row["passed"] for row in verdicts[note].tests)
        assert verdicts[note].sandbox_backend == "bwrap"
    for _, note, _ in WRONG:
        assert verdicts[note].status == "failed", (note, verdicts[note].detail)
        assert any(not row["passed"] for row in verdicts[note].tests)  # which tests caught it, named
    assert verdicts["hostile"].status in ("failed", "flagged"), verdicts["hostile"].detail
    assert "tried_answer_judge" in worker.output()

    # The reviewer sees which correct alternatives the tests accepted, with each test's result.
    html = client_for(maintainer).get(reverse("review-detail", args=[draft.pk])).content.decode()
    own = client_for(author).get(reverse("submission-detail", args=[draft.pk])).content.decode()
    assert page_problems(html) == page_problems(own) == ([], [])  # ids once, each label bound in its own form
    assert "np.where instead of np.minimum" in page_text(own)
    review = page_text(html)
    assert "Tried answers" in review and "np.where instead of np.minimum" in review
    assert html.count('data-testid="tried-status">Passed<') == 3 and "forgets to square the gradient" in review
    assert html.count('data-testid="tried-status">Failed<') + html.count('data-testid="tried-status">Flagged<') == 3
    # Each failed test says beside it what its assertion said, not only that it failed.
    assert own.count('data-testid="test-said"') >= 2 and "AssertionError" in own


@pytest.mark.django_db
def test_a_stranger_cannot_try_answers_on_someone_elses_submission(draft, author, other_author, media_root):
    revision = services.submission_submit(submission=draft, actor=author)
    revision.test_manifest = {"runner": "unittest", "tests": {}}
    revision.save(update_fields=["test_manifest"])
    body = {"try-snippet": snippet_value(revision, CLIP), "try-code": "        rho = rho\n"}
    response = client_for(other_author).post(reverse("answer-try", args=[draft.pk]), body)
    assert response.status_code == 404
    assert not TriedAnswer.objects.exists()
    # The author may (the same request): the refusal above was the stranger's, not the request's.
    response = client_for(author).post(reverse("answer-try", args=[draft.pk]), body)
    assert response.status_code == 302 and TriedAnswer.objects.get().tried_by == author


@pytest.mark.django_db
def test_tries_count_against_the_run_quota_and_need_a_validated_reference(draft, author, media_root, settings):
    settings.RUNS_ACTIVE_PER_USER = 1
    revision = services.submission_submit(submission=draft, actor=author)
    client = client_for(author)
    body = {"try-snippet": snippet_value(revision, CLIP), "try-code": "        rho = rho\n"}
    page = page_text(client.post(reverse("answer-try", args=[draft.pk]), body, follow=True).content.decode())
    assert "Not tried: revision r1 has no validated reference yet" in page
    assert not TriedAnswer.objects.exists()

    revision.test_manifest = {"runner": "unittest", "tests": {}}
    revision.save(update_fields=["test_manifest"])
    client.post(reverse("answer-try", args=[draft.pk]), body)
    assert TriedAnswer.objects.get().status == "pending"  # queued (this test runs no worker): it holds the quota
    page = page_text(client.post(reverse("answer-try", args=[draft.pk]), body, follow=True).content.decode())
    assert "Not tried: you have 1 tried answer(s) and 0 run(s) queued or running" in page
    assert TriedAnswer.objects.count() == 1
