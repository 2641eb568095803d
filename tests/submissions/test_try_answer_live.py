"""Try an answer, live (issue 35, item 3): a try posted from the submission's page comes back as the tried answers'
list, which polls itself while an answer is being judged and stops once every verdict is in; in a browser, the
verdict appears without a reload. The judging itself is a worker's (test_try_answer.py); here the worker's own ending
of an answer (`tried_answer_error`, what it does when the sandbox fails) stands in for the verdict."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from submissions import answers, services
from submissions.models import TriedAnswer
from tests.submissions.conftest import fill_draft
from tests.submissions.test_try_answer import CLIP, snippet_value

POLLS = 'hx-trigger="every 2s"'


def validated_revision(submission, author):
    """A revision whose reference passed (its test manifest set as validation sets it): answers can be tried on it."""
    revision = services.submission_submit(submission=submission, actor=author)
    revision.test_manifest = {"runner": "unittest", "tests": {}}
    revision.save(update_fields=["test_manifest"])
    return revision


@pytest.mark.django_db
def test_a_try_posted_with_htmx_answers_the_list_which_polls_until_every_verdict_is_in(
    draft, author, other_author, media_root, settings
):
    settings.RUNS_ACTIVE_PER_USER = 5
    revision = validated_revision(draft, author)
    client = Client()
    client.force_login(author)
    body = {"try-snippet": snippet_value(revision, CLIP), "try-code": "        rho = rho\n", "try-note": "identity"}
    response = client.post(reverse("answer-try", args=[draft.pk]), body, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith("{#") is False
    assert 'id="tried-list"' in html and POLLS in html and reverse("tried-answers", args=[draft.pk]) in html
    assert 'data-testid="try-said"' in html and "its verdict appears below" in html
    tried = TriedAnswer.objects.get()
    assert f'data-tried="{tried.pk}"' in html and "being judged" in html

    # The polled list keeps saying how a body pasted at column 0 with tabs was placed (walk 5: it vanished).
    client.post(reverse("answer-try", args=[draft.pk]), {**body, "try-code": "rho = rho\nif rho:\n\trho = rho\n"})
    reindented = TriedAnswer.objects.latest("pk")
    polled = client.get(reverse("tried-answers", args=[draft.pk])).content.decode()
    assert reindented.reindented == "reindented to the snippet's indentation (tabs expanded)"
    assert f'<p class="muted" data-testid="tried-reindented">{reindented.reindented}</p>' in unescape(polled)
    assert polled.count('data-testid="tried-reindented"') == 1  # the body tried as it sits in the file: nothing said
    reindented.delete()

    # A refused try says why in the list, and the pending one keeps it polling.
    refused = client.post(
        reverse("answer-try", args=[draft.pk]), {**body, "try-code": "  "}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Not tried: the answer is empty" in refused and POLLS in refused
    assert TriedAnswer.objects.count() == 1

    # A long test id and verdict line (as a replay test's) wrap in their column: the page does not widen (walk).
    TriedAnswer.objects.filter(pk=tried.pk).update(
        tests=[{"id": "__main__.ReplayTest.test_recorded_calls_of_every_snippet_function_" + "x" * 80, "passed": False}]
    )
    answers.tried_answer_error(tried=tried, detail="the sandbox failed: " + "a-long-unbroken-line-" * 20)
    listed = client.get(reverse("tried-answers", args=[draft.pk])).content.decode()
    assert POLLS not in listed and 'data-testid="tried-status">Error<' in listed  # done: it stops polling

    stranger = Client()
    stranger.force_login(other_author)
    assert stranger.get(reverse("tried-answers", args=[draft.pk])).status_code == 404


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_in_a_browser_the_verdict_appears_without_a_reload(browser_page, live_server, media_root, settings):
    settings.RUNS_ACTIVE_PER_USER = 5
    author = User.objects.create_user("ada", password="a-long-pass-phrase-9")
    submission = fill_draft(services.submission_create(author=author), author)
    revision = validated_revision(submission, author)
    page, base = browser_page, live_server.url
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("a-long-pass-phrase-9")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{base}{reverse('submission-detail', args=[submission.pk])}")
    page.evaluate("window.notReloaded = true")

    form = page.get_by_test_id("try-answer-form")
    form.locator('[name="try-snippet"]').select_option(snippet_value(revision, CLIP))
    form.locator('[name="try-code"]').fill("        rho = rho\n")
    form.locator('[name="try-note"]').fill("identity")
    form.get_by_role("button", name="Try this answer").click()
    page.get_by_test_id("tried-status").filter(has_text="Pending").wait_for(timeout=15_000)
    tried = TriedAnswer.objects.get()

    # A long test id and verdict line (as a replay test's) wrap in their column: the page does not widen (walk).
    TriedAnswer.objects.filter(pk=tried.pk).update(
        tests=[{"id": "__main__.ReplayTest.test_recorded_calls_of_every_snippet_function_" + "x" * 80, "passed": False}]
    )
    answers.tried_answer_error(tried=tried, detail="the sandbox failed: " + "a-long-unbroken-line-" * 20)
    page.get_by_test_id("tried-status").filter(has_text="Error").wait_for(timeout=15_000)
    assert page.evaluate("window.notReloaded") is True  # the list was swapped in, the page never reloaded
    page.set_viewport_size({"width": 1366, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert form.locator('[name="try-code"]').input_value() == "        rho = rho\n"  # kept, to try a variation
