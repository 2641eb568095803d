"""The longest navigation, a staff maintainer's, fits one line at a laptop's 1280 px (last session's walk in Chromium:
it wrapped onto two, the brand alone on the first). Screenshot in test-artifacts/navigation/."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from tests.conftest import REPO
from tests.test_phone_browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "navigation"


# A usual account name shows whole; a long one is cut with an ellipsis rather than wrap the line.
@pytest.mark.parametrize("username", ["alexandra.m", "alexandra.montgomery-fitzgerald.research"])
def test_a_staff_maintainers_navigation_is_one_line_at_1280_px(browser_page, live_server, username):
    user = User.objects.create_user(username, password="pw-alexandra-12345", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    page, base = browser_page, live_server.url
    assert page.viewport_size["width"] == 1280
    sign_in(page, base, user)
    page.goto(f"{base}/guides/")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"maintainer-1280-{len(username)}.png"))
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Operations", "Admin", username):  # the longest navigation: every link shown
        assert nav.get_by_role("link", name=name).is_visible()
    account = nav.get_by_role("link", name=username)
    whole = account.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert whole == (username == "alexandra.m"), "a usual name shows whole, a long one is cut"
    # Each item's vertical middle, and the brand's: one line shares one middle (the Log out button is a form).
    middles = page.evaluate(
        """() => [document.querySelector('header.site .brand'),
                  ...document.querySelectorAll('header.site nav > a, header.site nav > form')]
            .map(e => { const r = e.getBoundingClientRect(); return Math.round(r.top + r.height / 2); })"""
    )
    assert max(middles) - min(middles) <= 2, f"the navigation wraps at 1280 px: item middles {middles}"
    brand = page.locator("header.site .brand").bounding_box()
    assert page.locator("header.site").bounding_box()["height"] <= brand["height"] + 30, "the header is one line"
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
