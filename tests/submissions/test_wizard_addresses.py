"""The form in steps keeps each step at its own address (walk 4: the address bar showed step 1's while the author
moved on, and going back offered the new-paper form again): a saved step answers htmx with the next step and that
step's address for the history, replacing the new-paper form's; a reload of it, or a history restore, is that step's
whole page; the last step goes to the submission's page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from submissions.models import Submission

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def current_step(html: str) -> str:
    return re.search(r'<li aria-current="step">(?:<a [^>]*>)?([^<]+)', html).group(1)


def test_each_saved_step_arrives_at_its_own_address(client, author, media_root):
    client.force_login(author)
    created = client.post(reverse("submission-new"), {"title": "DampNest"}, headers=HTMX)
    submission = Submission.objects.get()
    paper = reverse("submission-step", args=[submission.pk, "paper"])
    assert created.status_code == 200 and created["HX-Replace-Url"] == paper and "HX-Push-Url" not in created
    assert created["HX-Retarget"] == "#wizard" and created["HX-Reswap"].startswith("outerHTML")
    body = created.content.decode()
    assert "<html" not in body and current_step(body) == "Paper text" and f'hx-post="{paper}"' in body
    assert "<title>DampNest · Submit" in body, "the tab names the submission, as a reload would"

    saved = client.post(paper, {"text": "word " * 120, "text_format": "md"}, headers=HTMX)
    code = reverse("submission-step", args=[submission.pk, "code"])
    assert saved["HX-Push-Url"] == code and current_step(saved.content.decode()) == "Code"
    page = client.get(code).content.decode()  # a reload, or the link shared
    assert "<html" in page and current_step(page) == "Code"
    restored = client.get(code, headers={**HTMX, "HX-History-Restore-Request": "true"}).content.decode()
    assert "<html" in restored and current_step(restored) == "Code", "htmx restores history with a whole page"

    details = client.post(
        reverse("submission-step", args=[submission.pk, "details"]),
        {"title": "DampNest", "id": "dampnest"},
        headers=HTMX,
    )
    assert details["HX-Push-Url"] == paper


def test_the_last_step_goes_to_the_submissions_page(client, draft, author):
    client.force_login(author)
    last = client.post(
        reverse("submission-step", args=[draft.pk, "files"]), {"annotated_paths": ["optimizer.py"]}, headers=HTMX
    )
    assert last["HX-Redirect"] == reverse("submission-detail", args=[draft.pk]), last.content.decode()[-1500:]
