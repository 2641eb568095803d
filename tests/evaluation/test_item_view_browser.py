"""In a real browser (Debian's Chromium driven by Playwright): from a run's page to one item, the model's code
highlighted beside the reference and their diff, side by side at desktop width and stacked at phone width, never
wider than the screen. Screenshots go to test-artifacts/items/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from evaluation.models import Outcome
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import REPO
from tests.evaluation.test_item_view import scored  # noqa: F401 (a fixture)

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
