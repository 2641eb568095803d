"""Every allowed and every refused transition of the submission state machine, with who may make it."""

from __future__ import annotations

import itertools

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied

from submissions import services
from submissions.models import StateChange, Submission

State = Submission.State
pytestmark = pytest.mark.django_db


def at(submission: Submission, state: str) -> Submission:
    Submission.objects.filter(pk=submission.pk).update(state=state)
    submission.refresh_from_db()
    return submission


ALL = [s.value for s in State]

# The state machine as the design document states it (DESIGN.md, Domain: Submission), written out here, not read from
# services.TRANSITIONS, so that a wrong entry in the table under test fails this test:
#   draft -> submitted -> validating -> (invalid -> draft) | awaiting_review ->
#   changes_requested (-> new revision -> validating) | accepted | rejected; withdrawn by the author before acceptance;
#   awaiting_review -> draft when the author revises it before review (issue 35: submitted again, validated again).
# Who: the author submits, revises and withdraws; the system validates; a maintainer decides a review.
EXPECTED = {
    ("draft", "submitted"): "author",
    ("submitted", "validating"): "system",
    ("validating", "invalid"): "system",
    ("validating", "awaiting_review"): "system",
    ("invalid", "draft"): "author",
    ("awaiting_review", "draft"): "author",
    ("awaiting_review", "changes_requested"): "maintainer",
    ("awaiting_review", "accepted"): "maintainer",
    ("awaiting_review", "rejected"): "maintainer",
    ("changes_requested", "validating"): "author",
    ("draft", "withdrawn"): "author",
    ("submitted", "withdrawn"): "author",
    ("validating", "withdrawn"): "author",
    ("invalid", "withdrawn"): "author",
    ("awaiting_review", "withdrawn"): "author",
    ("changes_requested", "withdrawn"): "author",
}


def test_the_design_names_every_state():
    assert {state for pair in EXPECTED for state in pair} == set(ALL)


@pytest.mark.parametrize("start,end", list(itertools.product(ALL, ALL)))
def test_transition_table(start, end, draft, author, maintainer):
    role = EXPECTED.get((start, end))
    submission = at(draft, start)
    actor = {"author": author, "maintainer": maintainer, "system": None}.get(role, author)
    if role is None:
        with pytest.raises(services.TransitionError, match="cannot become"):
            services._transition(submission, end, actor=actor)
        assert Submission.objects.get(pk=draft.pk).state == start
        return
    services._transition(submission, end, actor=actor, reason="because")
    assert Submission.objects.get(pk=draft.pk).state == end
    change = StateChange.objects.get(submission=draft)
    assert (change.from_state, change.to_state, change.actor, change.reason) == (start, end, actor, "because")


@pytest.mark.parametrize("start,end", [k for k, role in EXPECTED.items() if role != "system"])
def test_wrong_people_are_refused(start, end, draft, author, other_author, maintainer, admin):
    role = EXPECTED[(start, end)]
    wrong = [other_author, None] + ([maintainer, admin] if role == "author" else [author])
    for actor in wrong:
        with pytest.raises(PermissionDenied):
            services._transition(at(draft, start), end, actor=actor)
    assert not StateChange.objects.filter(submission=draft).exists()


def test_a_maintainer_never_reviews_their_own_submission(maintainer, media_root):
    from tests.submissions.conftest import fill_draft

    own = at(fill_draft(services.submission_create(author=maintainer), maintainer), State.AWAITING_REVIEW)
    with pytest.raises(PermissionDenied, match="never review their own"):
        services.submission_accept(submission=own, actor=maintainer, reason="looks fine")


def test_every_state_change_mails_the_author(draft, author, maintainer, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.submission_withdraw(submission=draft, actor=author, reason="found a bug")
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["ada@example.org"] and "Withdrawn" in mail.outbox[0].subject
    assert "found a bug" in mail.outbox[0].body


def test_a_notification_links_back_to_its_page_at_the_sites_address(
    draft, author, settings, django_capture_on_commit_callbacks
):
    settings.SITE_URL = "https://bench.example.org"
    with django_capture_on_commit_callbacks(execute=True):
        services.submission_withdraw(submission=draft, actor=author, reason="found a bug")
    assert f"See it at https://bench.example.org/submissions/{draft.pk}/" in mail.outbox[0].body


def test_decisions_need_a_reason(draft, maintainer):
    at(draft, State.AWAITING_REVIEW)
    for decide in (services.submission_accept, services.submission_reject, services.submission_request_changes):
        with pytest.raises(services.TransitionError, match="needs a reason"):
            decide(submission=draft, actor=maintainer, reason="  ")


def test_drafts_are_editable_only_by_their_author_and_only_while_editable(draft, author, other_author):
    with pytest.raises(PermissionDenied):
        services.draft_update(submission=draft, actor=other_author, values={"requirements": "x"})
    at(draft, State.AWAITING_REVIEW)
    with pytest.raises(services.TransitionError, match="cannot be edited"):
        services.draft_update(submission=draft, actor=author, values={"requirements": "x"})
