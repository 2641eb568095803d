"""What an author meets in an afternoon after submitting (issue 35's walk): one mail per submit, the review page's
note and metadata diff, earlier revisions reachable, and the release named after acceptance."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.urls import reverse

from benchmarks.models import BenchmarkVersion
from benchmarks.services.publishing import version_publish
from submissions import services
from submissions.models import Submission, ValidationCheck, ValidationReport
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db


def test_one_submit_mails_the_author_once_that_validation_started(
    client, draft, author, django_capture_on_commit_callbacks
):
    client.force_login(author)
    with django_capture_on_commit_callbacks() as callbacks:
        client.post(reverse("submission-action", args=[draft.pk, "submit"]))
    for callback in callbacks[:-1]:  # the last one queues the validation, whose result mails once more when it ends
        callback()
    assert [m.subject for m in mail.outbox] == [f"[research-code benchmark] {draft}: Validating"]
    assert "its validation has started" in mail.outbox[0].body


def _part(response, testid: str, closing: str) -> str:
    """The text of the element marked `testid`, up to the first `closing` tag after it, its spaces collapsed."""
    html = response.content.decode()
    start = html.index(f'data-testid="{testid}"')
    fragment = html[start : html.index(closing, start)].split(">", 1)[1]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _second_revision(submission, author) -> Submission:
    """r1 as the demo, then r2 with another title and venue, a file added, a snippet renamed, numpy pinned."""
    services.submission_submit(submission=submission, actor=author)
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.AWAITING_REVIEW)
    services.submission_edit(submission=submission, actor=author)
    files = demo_files()
    files["NOTES.md"] = b"why"
    files["paper2code_requirements.txt"] = b"numpy>=1.26\n"
    files["optimizer.py"] = files["optimizer.py"].replace(b"bias-correct both moments", b"bias-corrected moments")
    metadata = {**submission.draft["metadata"], "title": "DampNest, clearer", "venue": "DEMO2026"}
    submission.refresh_from_db()
    fill_draft(submission, author, metadata=metadata, files=services.draft_files_store(files))
    services.submission_submit(submission=submission, actor=author, note="Renamed a snippet; pinned numpy.")
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.AWAITING_REVIEW)
    return Submission.objects.get(pk=submission.pk)


def test_the_review_page_shows_the_revisions_note_and_what_its_metadata_changed(client, draft, author, maintainer):
    submission = _second_revision(draft, author)
    client.force_login(maintainer)
    response = client.get(reverse("review-detail", args=[submission.pk]))
    section = _part(response, "revision-changes", "</section>")
    assert "Revision r2: what changed since r1" in section
    assert "Renamed a snippet; pinned numpy." in section
    rows = _part(response, "metadata-diff", "</dl>")
    assert "title Demo dampnest → DampNest, clearer" in rows and "venue DEMO2025 → DEMO2026" in rows
    assert "files added NOTES.md" in rows and "files changed optimizer.py, paper2code_requirements.txt" in rows
    assert "removed: optimizer.py: bias-correct both moments → added: optimizer.py: bias-corrected moments" in rows
    assert "requirements numpy now numpy>=1.26" in rows


def test_each_revision_is_linked_from_its_page_and_reads_as_what_it_is(client, draft, author, maintainer):
    submission = _second_revision(draft, author)
    r1, r2 = submission.revisions.order_by("number")
    ValidationReport.objects.filter(revision=r1).update(status="passed")
    client.force_login(author)
    detail = client.get(reverse("submission-detail", args=[submission.pk]))
    rows = _part(detail, "revisions", "</ul>")
    assert "r1 , " in rows and "validated, superseded by r2" in rows and "proposed: validating" in rows
    assert reverse("submission-revision", args=[submission.pk, 1]) in detail.content.decode()
    page = client.get(reverse("submission-revision", args=[submission.pk, 1]))
    said = _part(page, "revision-read-only", "</p>")
    assert "An earlier revision" in said and "read-only; the submission has moved on to r2" in said
    text = page.content.decode()
    assert "Demo dampnest" in text and "bias-correct both moments" in text and "hx-trigger" not in text
    assert "<form" not in text.split("<main", 1)[-1], "an earlier revision is read-only"
    client.force_login(maintainer)
    review = client.get(reverse("review-detail", args=[submission.pk])).content.decode()
    assert reverse("submission-revision", args=[submission.pk, 1]) in review
    client.force_login(User.objects.create_user("eve", "eve@example.org", "pw"))
    assert client.get(reverse("submission-revision", args=[submission.pk, 1])).status_code == 403


def test_a_draft_and_a_proposed_new_revision_are_marked_in_the_revisions_list(client, draft, author):
    services.submission_submit(submission=draft, actor=author)
    Submission.objects.filter(pk=draft.pk).update(state=Submission.State.ACCEPTED)
    proposed = services.submission_revise(submission=draft, actor=author)
    client.force_login(author)
    rows = _part(client.get(reverse("submission-detail", args=[draft.pk])), "revisions", "</ul>")
    assert "r1 , " in rows and "accepted" in rows
    assert f"proposed proposed new revision (submission {proposed.pk}): draft" in rows
    rows = _part(client.get(reverse("submission-detail", args=[proposed.pk])), "revisions", "</ul>")
    assert rows == "draft r1: draft, not submitted yet"


def test_after_acceptance_the_author_is_told_the_release_credited_and_shown_their_own_reference(
    client, draft, author, other_author, maintainer, django_capture_on_commit_callbacks
):
    author.first_name, author.last_name = "Ada", "Lovelace"
    author.save()
    services.submission_submit(submission=draft, actor=author)
    Submission.objects.filter(pk=draft.pk).update(state=Submission.State.AWAITING_REVIEW)
    with django_capture_on_commit_callbacks(execute=True):
        task = services.submission_accept(submission=draft, actor=maintainer, reason="good")
    [accepted] = mail.outbox
    assert f"Its task is in the draft of the next release, {BenchmarkVersion.objects.get().name}" in accepted.body
    client.force_login(author)
    said = _part(client.get(reverse("submission-detail", args=[draft.pk])), "releases", "</p>")
    assert said == f"Task revision 1 is in the draft of the next release, {BenchmarkVersion.objects.get().name} " + (
        "(public once maintainers publish it)."
    )
    # The maintainer who accepted it is told the same on the review page (a newcomer's walk found it silent there).
    client.force_login(maintainer)
    reviewed = _part(client.get(reverse("review-detail", args=[draft.pk])), "releases", "</p>")
    assert reviewed == said
    client.force_login(author)
    listed = client.get(reverse("submission-list"))
    assert _part(listed, "in-release", "</span>") == f"in the draft {BenchmarkVersion.objects.get().name}"
    release = version_publish(version=BenchmarkVersion.objects.get(), actor=maintainer, notes="first")
    assert _part(client.get(reverse("submission-list")), "in-release", "</span>") == f"in {release.name}"
    detail = client.get(reverse("submission-detail", args=[draft.pk]))
    assert _part(detail, "releases", "</p>") == f"Task revision 1 is in release {release.name} ."
    paper = reverse("paper-detail", args=[release.name, task.paper.slug])
    assert paper in detail.content.decode()
    page = client.get(paper)
    assert _part(page, "submitted-by", "</dd>") == "Ada Lovelace (you)"
    assert 'data-testid="reference-withheld"' not in page.content.decode()
    assert "Annotated code <code>optimizer.py</code>" in page.content.decode()
    client.force_login(other_author)  # anyone else still may attempt its items: their reference stays withheld
    page = client.get(paper)
    assert _part(page, "submitted-by", "</dd>") == "Ada Lovelace"
    assert 'data-testid="reference-withheld"' in page.content.decode()


def test_a_warning_many_checks_share_is_said_once_with_their_count(client, draft, author):
    revision = services.submission_submit(submission=draft, actor=author)
    same = "not sealed (step writes its state in place): its answers keep the in-process guard only"
    for position in range(15):
        ValidationCheck.objects.create(
            report=revision.report,
            position=position,
            key=f"sealed:optimizer.py:{position}",
            label=f"snippet {position} sealed",
            status="passed",
            warning=same if position else "mutation score 50% is below the minimum 60%",
        )
    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[draft.pk]))
    html = page.content.decode()
    assert html.count('data-testid="check-warning"') == 2
    said = _part(page, "check-warning", "</p>")
    assert said == "Warning: mutation score 50% is below the minimum 60%"
    later = html[html.index('data-check="sealed:optimizer.py:1"') :]
    assert " ".join(unescape(re.sub(r"<[^>]+>", " ", later.split("</p>", 1)[0])).split()).endswith(
        f"Warning (14 checks: this one and the 13 below marked Warning): {same}"
    )
    assert html.count('class="badge warning"') >= 15, "each check keeps its Warning badge"
