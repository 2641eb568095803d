"""At phone width (390 px, an iPhone 12-14) the home, leaderboard, release and guide pages fit the screen: no horizontal
overflow, for a visitor and for a signed-in maintainer with the longest navigation. Screenshots go to
test-artifacts/phone/."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client

from benchmarks.services import pset_import
from tests.conftest import DEMO_PSET, REPO
from tests.evaluation.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "phone"
PAGES = {"home": "/", "leaderboard": "/versions/1.0.0/leaderboard/", "release": "/versions/1.0.0/",
         "format-guide": "/guides/format/"}


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
    for name, passed in (("reference", True), ("placeholder", False), ("strong", True)):
        calibrate(version, name, passed=passed)  # the leaderboard tables have rows, as in use
    page.set_viewport_size({"width": 390, "height": 844})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, path in PAGES.items():
        page.goto(f"{base}{path}")
        page.screenshot(path=str(ARTIFACTS / f"visitor-{name}.png"), full_page=True)
        assert overflow(page) <= 0, f"{path} overflows at 390 px by {overflow(page)} px (visitor): {too_wide(page)}"

    signed_in = Client()
    signed_in.force_login(admin)
    page.context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "url": base,
                               "value": signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value}])
    for name, path in PAGES.items():
        page.goto(f"{base}{path}")
        assert page.get_by_role("button", name="Log out").is_visible()
        page.screenshot(path=str(ARTIFACTS / f"maintainer-{name}.png"), full_page=True)
        assert overflow(page) <= 0, f"{path} overflows at 390 px by {overflow(page)} px (maintainer): {too_wide(page)}"
