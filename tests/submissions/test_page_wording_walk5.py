"""Small wording of the submission and review pages (walk 5): a decision's reason that ends its own sentence gets no
second period, the comment box is labelled apart from its button, and a check's output is called output beside its
duration."""

from __future__ import annotations

import datetime

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from submissions import services
from submissions.forms import CommentForm
from submissions.models import ValidationCheck, ValidationReport
from tests.conftest import page_text

pytestmark = pytest.mark.django_db


def test_a_decision_reason_ending_its_sentence_gets_no_second_period():
    decided = datetime.datetime(2026, 12, 6, tzinfo=datetime.UTC)
    match = {"paper": "dampnest", "title": "DampNest", "where": "in release 1.0.0", "what": "the same title"}

    def said(reason: str) -> str:
        decision = {"label": "Accepted", "decided_at": decided, "reason": reason, "state": "accepted"}
        html = render_to_string("submissions/_matches.html", {"matches": [match], "match_decision": decision})
        return page_text(html.split('data-testid="match-decision">', 1)[1].split("</p>", 1)[0])

    assert said("Checked on a walk.").endswith("as no duplicate: Checked on a walk.")
    assert said("checked on a walk").endswith("as no duplicate: checked on a walk.")
    assert said("").endswith("00:00.")


def test_the_comment_box_and_a_checks_output_are_labelled(client, draft, author):
    assert CommentForm().fields["body"].label == "Your comment"
    revision = services.submission_submit(submission=draft, actor=author)
    report = ValidationReport.objects.get(revision=revision)
    ValidationCheck.objects.create(
        report=report, position=0, key="reference", label="Reference", status="passed", detail="ok", duration=14.1
    )
    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[draft.pk])).content.decode()
    assert "<summary>output (14.1 s)</summary>" in page
    assert page_text(page).count("Your comment") == 1
