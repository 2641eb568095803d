"""The attempt page in Chromium (issue 37's walk), where its script decides: submitting an empty editor says what is
wrong beside it (it used to do nothing, silently), and the heading's badge turns from "being scored" to the verdict
when the polled result brings it, without a reload. The verdict is recorded here as a worker would (the scoring has
its own browser test, tests/humans/test_attempt_browser.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from evaluation import services as evaluation
from evaluation.models import Generation
from evaluation.outcomes import Verdict
from humans import services
from tests.evaluation.test_upload_browser import sign_in
from tests.humans.conftest import dampnest_item

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_an_empty_editor_says_so_and_the_badge_follows_the_verdict(browser_page, live_server, held_release, people):
    page, base, person = browser_page, live_server.url, people[0]
    item = dampnest_item(held_release)
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=item.pk)
    sign_in(page, base, person)
    page.goto(f"{base}/attempts/{attempt.pk}/")
    expect(page.get_by_test_id("code-editor")).to_be_visible()
    page.locator(".ace_content").click()
    page.keyboard.type("    ")  # blank: nothing to score
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_test_id("body-error")).to_have_text(services.EMPTY_BODY)
    assert page.url == f"{base}/attempts/{attempt.pk}/"
    attempt.refresh_from_db()
    assert attempt.state == "open", "nothing was sent"

    page.keyboard.type("st['g_prev'] = g.copy()")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_test_id("attempt-pending")).to_be_visible()
    expect(page.get_by_test_id("attempt-state")).to_have_text("being scored")
    attempt.refresh_from_db()
    evaluation.outcome_record(
        run=attempt.run,
        snippet=item,
        sample=0,
        verdict=Verdict("passed", "", ""),
        generation=Generation.objects.get(run=attempt.run),
    )
    expect(page.get_by_test_id("attempt-verdict")).to_have_text("passed", timeout=10_000)  # the poll, every 2 s
    expect(page.get_by_test_id("attempt-state")).to_have_text("passed")
    assert page.locator("#attempt-state").count() == 1
