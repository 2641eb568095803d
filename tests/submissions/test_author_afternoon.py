"""What an author meets in an afternoon after submitting (issue 35's walk): one mail per submit, the review page's
note and metadata diff, earlier revisions reachable, and the release named after acceptance."""

from __future__ import annotations

import pytest
from django.core import mail
from django.urls import reverse

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
