"""At phone width (390 px, an iPhone 12-14) the public pages fit the screen: home, the leaderboard and its tabs, the
hardest snippets, a paper, a release, a comparison, a run, an item with its diff, a model and the guides; no
horizontal overflow, for a visitor and for a signed-in maintainer with the longest navigation. Screenshots go to
test-artifacts/phone/."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client

from benchmarks.services.psets import pset_import
from tests.conftest import DEMO_PSET, REPO
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "phone"
PAGES = {
    "home": "/",
    "leaderboard": "/versions/1.0.0/leaderboard/",
    "release": "/versions/1.0.0/",
    "format-guide": "/guides/format/",
    "submitting-guide": "/guides/submitting/",
    "leaderboard-sizes": "/versions/1.0.0/leaderboard/?view=sizes",
    "leaderboard-failures": "/versions/1.0.0/leaderboard/?view=failures",
    "hardest-snippets": "/versions/1.0.0/difficulty/",
    "paper": "/versions/1.0.0/papers/dampnest/",
    "model": "/models/strong/",
}


def run_pages(runs) -> dict[str, str]:
    """Pages of particular runs: the comparison of two, a run, and one of its public items."""
    from evaluation.models import Outcome

    strong, placeholder = runs["strong"], runs["placeholder"]
    item = Outcome.objects.filter(run=placeholder, snippet__task__versions__name="1.0.0").order_by("pk").first()
    return {
        "compare": f"/versions/1.0.0/compare/?a={strong.pk}&b={placeholder.pk}",
        "run": f"/runs/{strong.pk}/",
        "item": f"/runs/{placeholder.pk}/items/{item.pk}/",
    }


def overflow(page) -> int:
    """How many CSS pixels the page is wider than the viewport (0 when it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def too_wide(page) -> list[str]:
    """The elements whose right edge passes the viewport, to say what overflows when the test fails."""
    return page.evaluate("""[...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .slice(0, 5).map(e => e.tagName + '.' + e.className + ': ' + (e.textContent || '').trim().slice(0, 40))""")


def test_pages_fit_a_phone_screen(browser_page, live_server, media_root, admin):
    page, base = browser_page, live_server.url
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    runs = {
        name: calibrate(version, name, passed=passed)  # the leaderboard tables have rows, as in use
        for name, passed in (("reference", True), ("placeholder", False), ("strong", True))
    }
    pages = {**PAGES, **run_pages(runs)}
    page.set_viewport_size({"width": 390, "height": 844})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, path in pages.items():
        assert page.goto(f"{base}{path}").status == 200, path
        page.screenshot(path=str(ARTIFACTS / f"visitor-{name}.png"), full_page=True)
        assert overflow(page) <= 0, f"{path} overflows at 390 px by {overflow(page)} px (visitor): {too_wide(page)}"

    signed_in = Client()
    signed_in.force_login(admin)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "url": base,
                "value": signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value,
            }
        ]
    )
    for name, path in pages.items():
        assert page.goto(f"{base}{path}").status == 200, path
        page.locator("header.site").get_by_text("Menu", exact=True).click()  # the navigation folds on a phone
        assert page.get_by_role("button", name="Log out").is_visible()
        page.screenshot(path=str(ARTIFACTS / f"maintainer-{name}.png"), full_page=True)
        assert overflow(page) <= 0, f"{path} overflows at 390 px by {overflow(page)} px (maintainer): {too_wide(page)}"


def test_the_curate_page_fits_a_phone_and_its_table_shows_it_scrolls(browser_page, live_server, media_root, admin):
    from benchmarks.services.curation import version_draft_create

    page, base = browser_page, live_server.url
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    version_draft_create(name="1.1.0")
    signed_in = Client()
    signed_in.force_login(admin)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "url": base,
                "value": signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value,
            }
        ]
    )
    page.set_viewport_size({"width": 390, "height": 844})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert page.goto(f"{base}/versions/1.1.0/curate/").status == 200
    for summary in page.locator("#curate-tasks summary").all():
        summary.click()  # the retire forms open inside the table
    page.screenshot(path=str(ARTIFACTS / "maintainer-curate.png"), full_page=True)
    assert overflow(page) <= 0, f"the curate page overflows at 390 px by {overflow(page)} px: {too_wide(page)}"
    wrap = page.locator("div.table-wrap:has(#curate-tasks)")
    assert wrap.evaluate("e => e.scrollWidth > e.clientWidth"), "the table scrolls inside its box"
    assert "gradient" in wrap.evaluate("e => getComputedStyle(e).backgroundImage"), "with a visible cue"
