"""How an author revises (issue 35, item 4): a submission awaiting review goes back to the form and is validated
again; an accepted task gets a proposed new revision, a submission of its own that is validated and reviewed,
enters the next draft release without a replacement question (it replaces its own paper by design), and the
release's changelog names the new revision. The accepted submission itself stays accepted."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from benchmarks.services.publishing import version_publish
from submissions import services
from submissions.models import Submission, ValidationReport
from tests.conftest import page_text
from tests.submissions.conftest import fill_draft

pytestmark = pytest.mark.django_db
State = Submission.State


def _awaiting(submission, author) -> Submission:
    """Submitted, and its validation taken as passed (the checks themselves are tested elsewhere)."""
    services.submission_submit(submission=submission, actor=author)
    Submission.objects.filter(pk=submission.pk).update(state=State.AWAITING_REVIEW)
    return Submission.objects.get(pk=submission.pk)


def test_an_author_revises_a_submission_awaiting_review_and_it_is_validated_again(client, draft, author):
    submission = _awaiting(draft, author)
    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    assert "Revise before review" in page
    response = client.post(reverse("submission-action", args=[submission.pk, "edit"]))
    assert response.status_code == 302 and response.url == reverse("submission-step", args=[submission.pk, "details"])
    submission.refresh_from_db()
    assert submission.state == State.DRAFT
    services.draft_paper_save(
        submission=submission, actor=author, paper_path="paper2code_paper.md", text="A clearer text. " * 40
    )
    revision = services.submission_submit(submission=submission, actor=author, note="clearer paper text")
    submission.refresh_from_db()
    assert (revision.number, revision.note, submission.state) == (2, "clearer paper text", State.VALIDATING)


def test_after_an_edit_the_earlier_revisions_report_says_which_revision_it_was_for(client, draft, author):
    """Issue 37: after "Revise before review", r1's "Validation passed" still read as the current state."""
    submission = _awaiting(draft, author)
    ValidationReport.objects.update_or_create(revision=submission.latest_revision, defaults={"status": "passed"})
    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    assert "Validation of r1 <span" in page and 'data-testid="report-superseded"' not in page
    client.post(reverse("submission-action", args=[submission.pk, "edit"]))
    # Back to a draft but nothing edited yet (walk 5: it said "edited since" already): the report is still current.
    page = client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    assert 'data-testid="report-superseded"' not in page
    submission.refresh_from_db()
    services.draft_update(submission=submission, actor=author, values={"metadata": submission.draft["metadata"]})
    assert (
        'data-testid="report-superseded"'
        not in client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    )
    metadata = {**submission.draft["metadata"], "title": "A clearer title"}
    services.draft_update(submission=submission, actor=author, values={"metadata": metadata})
    page = client.get(reverse("submission-detail", args=[submission.pk])).content.decode()
    assert "Validation of r1 <span" in page and 'class="badge superseded"' in page
    notice = page[page.index('data-testid="report-superseded"') :].split("</p>")[0]
    assert "for revision r1" in notice and "edited since" in notice


def test_only_its_author_revises_it(draft, author, other_author, maintainer):
    submission = _awaiting(draft, author)
    for someone in (other_author, maintainer):
        with pytest.raises(PermissionDenied):
            services.submission_edit(submission=submission, actor=someone)


def test_a_proposed_revision_of_an_accepted_task_enters_the_next_release_and_its_changelog(
    client, author, maintainer, other_author, media_root
):
    first = _awaiting(fill_draft(services.submission_create(author=author), author), author)
    task = services.submission_accept(submission=first, actor=maintainer, reason="good")
    release = version_publish(version=BenchmarkVersion.objects.get(status="draft"), actor=maintainer, notes="first")

    with pytest.raises(PermissionDenied):
        services.submission_revise(submission=first, actor=other_author)
    client.force_login(author)
    assert "Propose a new revision" in client.get(reverse("submission-detail", args=[first.pk])).content.decode()
    response = client.post(reverse("submission-action", args=[first.pk, "revise"]))
    proposal = Submission.objects.get(revises=first)
    assert response.url == reverse("submission-step", args=[proposal.pk, "details"])
    assert proposal.state == State.DRAFT and proposal.draft["files"] == first.latest_revision.files
    with pytest.raises(services.TransitionError, match=f"already open: submission {proposal.pk}"):
        services.submission_revise(submission=first, actor=author)

    services.draft_paper_save(
        submission=proposal, actor=author, paper_path="paper2code_paper.md", text="The revised paper text. " * 40
    )
    proposal = _awaiting(proposal, author)
    new_task = services.submission_accept(submission=proposal, actor=maintainer, reason="better text")  # no question
    first.refresh_from_db()
    assert first.state == State.ACCEPTED and first.task == task  # the accepted one stays as it was
    assert (new_task.paper, new_task.revision) == (task.paper, task.revision + 1)
    draft = BenchmarkVersion.objects.get(status="draft")
    assert list(draft.memberships.values_list("task_id", flat=True)) == [new_task.pk]
    published = version_publish(version=draft, actor=maintainer, notes="second")
    [change] = published.changelog["changed"]
    assert (change["paper"], change["from_revision"], change["to_revision"]) == (
        task.paper.slug,
        task.revision,
        new_task.revision,
    )
    assert change["files_changed"] == ["paper2code_paper.md"]
    assert list(release.memberships.values_list("task_id", flat=True)) == [task.pk]  # a release never changes


def test_only_an_accepted_submission_has_a_task_to_revise(draft, author):
    with pytest.raises(services.TransitionError, match="only an accepted submission has a task to revise"):
        services.submission_revise(submission=draft, actor=author)


def test_a_proposed_revision_renamed_to_another_paper_still_needs_the_confirmation(
    author, other_author, maintainer, media_root
):
    """The attack: an author proposes a revision of their own accepted paper under another author's paper id, to
    replace that paper without the question a maintainer is asked. Only a revision of its own paper skips it."""
    theirs = _awaiting(fill_draft(services.submission_create(author=author), author), author)
    services.submission_accept(submission=theirs, actor=maintainer, reason="good")
    mine = fill_draft(services.submission_create(author=other_author), other_author)
    services.draft_update(
        submission=mine, actor=other_author, values={"metadata": {**mine.draft["metadata"], "id": "mine"}}
    )
    mine = _awaiting(mine, other_author)
    # the same files as theirs: one paper once (test_one_paper_once.py) asks why it is not a duplicate
    services.submission_accept(submission=mine, actor=maintainer, reason="good", duplicate_reason="a test's copy")
    proposal = services.submission_revise(submission=mine, actor=other_author)
    services.draft_update(
        submission=proposal,
        actor=other_author,
        values={"metadata": {**proposal.draft["metadata"], "id": "dampnest"}},
    )
    proposal = _awaiting(proposal, other_author)
    with pytest.raises(services.TransitionError, match="paper id dampnest is already in draft"):
        services.submission_accept(submission=proposal, actor=maintainer, reason="looks fine")


def test_answers_tried_on_an_earlier_revision_stay_in_view_on_the_next(client, draft, author, maintainer):
    # A newcomer's walk: revising a submission left the tries of r1 out of r2's page, so a reviewer of the latest
    # revision never saw which alternatives the tests had been shown to accept.
    from submissions.models import TriedAnswer

    submission = _awaiting(draft, author)
    first = submission.revisions.get()
    TriedAnswer.objects.create(
        revision=first,
        snippet_file="optimizer.py",
        snippet_index=0,
        snippet_name="initialise optimiser state on first step",
        code="state = {}\n",
        note="an empty dict literal",
        tried_by=author,
        status=TriedAnswer.Status.PASSED,
    )
    client.force_login(author)
    assert client.post(reverse("submission-action", args=[submission.pk, "edit"])).status_code == 302
    submission.refresh_from_db()
    services.draft_paper_save(
        submission=submission, actor=author, paper_path="paper2code_paper.md", text="A clearer text. " * 40
    )
    services.submission_submit(submission=Submission.objects.get(pk=submission.pk), actor=author)
    client.force_login(maintainer)
    text = page_text(client.get(reverse("review-detail", args=[submission.pk])).content.decode())
    assert "No answer tried on this revision yet" in text
    assert "Tried on earlier revisions (1)" in text
    assert "r1initialise optimiser state on first step" in text  # its revision's cell, then its snippet's
    assert "an empty dict literal" in text
