"""In a real browser (Debian's Chromium driven by Playwright): from a run's page to one item, the model's code
highlighted beside the reference and their diff, side by side at desktop width and stacked at phone width, never
wider than the screen. Screenshots go to test-artifacts/items/."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client
from playwright.sync_api import expect

from evaluation.models import Outcome
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import REPO
from tests.evaluation.test_item_view import (
    recording_seal,
    scored,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "items"


@pytest.mark.parametrize("width", [1280, 390])
def test_an_item_shows_the_answer_beside_the_reference_with_the_diff(browser_page, live_server, scored, width):  # noqa: F811
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    run, changed = scored["run"], scored["changed"]
    outcome = Outcome.objects.get(run=run, snippet=changed)

    page.goto(f"{base}/runs/{run.pk}/")
    page.locator(f"#item-{outcome.pk} summary").click()
    page.locator(f"#item-{outcome.pk}").get_by_role("link", name="The model's code beside the reference").click()
    page.wait_for_url(f"{base}/runs/{run.pk}/items/{outcome.pk}/")
    answer, reference = page.locator(".side-by-side section").nth(0), page.locator(".side-by-side section").nth(1)
    expect(answer).to_contain_text("zz = '</code><script>alert(1)</script>'")  # shown as text, not run
    expect(reference).to_contain_text(scored["last"].strip())
    expect(page.locator(".diff .gi").last).to_contain_text("+    zz = ")
    expect(page.locator(".diff .gd").first).to_be_visible()
    a, r = answer.bounding_box(), reference.bounding_box()
    if width >= 1000:
        assert abs(a["y"] - r["y"]) < 2 and a["x"] + a["width"] <= r["x"], "side by side"
    else:
        assert r["y"] >= a["y"] + a["height"], "stacked on a phone"
    assert page.evaluate(
        "getComputedStyle(document.querySelector('.highlight .k, .highlight .kn')).color"
    ) != page.evaluate("getComputedStyle(document.querySelector('.highlight .n')).color"), "keywords stand out"
    page.screenshot(path=str(ARTIFACTS / f"item-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_maintainer_goes_from_the_flag_queue_to_an_item_and_its_replay(
    browser_page,
    live_server,
    scored,  # noqa: F811
    maintainer,
    width,
):
    """The Review page counts the flagged answers awaiting review; the queue lists one with what flagged it; its item
    page says the snippet is sealed and the replay disagreed, with its difference (a maintainer's to read)."""
    page, base = browser_page, live_server.url
    run, same = scored["run"], scored["same"]
    recording_seal(same, sealed=True)
    outcome = Outcome.objects.get(run=run, snippet=same)
    outcome.status, outcome.measured_status = Outcome.Status.FLAGGED, "passed"
    outcome.findings = [{"kind": "sealed-replay", "line": None, "detail": "call 1: out differs", "source": "replay"}]
    outcome.save()
    signed_in = Client()
    signed_in.force_login(maintainer)
    cookie = signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "url": base, "value": cookie}])
    page.set_viewport_size({"width": width, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{base}/")
    menu = page.locator("header.site").get_by_text("Menu", exact=True)
    if menu.is_visible():  # the navigation folds on a phone
        menu.click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Review", exact=True).click()
    page.wait_for_url(f"{base}/review/")
    page.get_by_test_id("flags-awaiting").get_by_role("link", name="1").click()
    page.wait_for_url(f"{base}/review/flags/")
    row = page.locator(f"[data-flagged-outcome='{outcome.pk}']")
    expect(row).to_contain_text("sealed-replay")
    expect(row).to_contain_text("call 1: out differs")
    page.screenshot(path=str(ARTIFACTS / f"flag-queue-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    row.get_by_role("link", name=same.name).click()
    page.wait_for_url(f"{base}/runs/{run.pk}/items/{outcome.pk}/")
    expect(page.get_by_test_id("replay-sealing")).to_contain_text("sealed: a pass needs")
    expect(page.get_by_test_id("replay-result")).to_contain_text("disagreed with the reference")
    expect(page.get_by_test_id("replay-difference")).to_have_text("call 1: out differs")
    page.screenshot(path=str(ARTIFACTS / f"item-replay-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    # The review is on the same page: confirmed, the item is failed and leaves the queue.
    review = page.locator(f"#flag-{outcome.pk}")
    review.get_by_label("Reason (optional)").fill("the replay shows a different update")
    review.get_by_role("button", name="Confirm: tampering, score as failed").click()
    page.wait_for_url(f"{base}/runs/{run.pk}/items/{outcome.pk}/")
    expect(page.get_by_test_id("flag-review")).to_contain_text("the replay shows a different update")
    page.goto(f"{base}/review/flags/")
    expect(page.get_by_test_id("flag-queue")).to_contain_text("No flagged answer awaits review.")
