"""The home page's Releases table on a phone (390 px, Chromium; issue 37's walk found it cut): the release and its
status on screen with no sideways swipe, the paper count and the date behind the table's "All columns" toggle, as
the other tables fold theirs (.table-wrap.folds). Screenshots go to test-artifacts/phone/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.services.curation import version_draft_create
from benchmarks.services.psets import pset_import
from benchmarks.services.publishing import version_deprecate
from tests.conftest import DEMO_PSET, REPO
from tests.test_phone_browser import PHONE, sign_in

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "phone"


def cut_cells(page, table: str) -> list[str]:
    """The shown cells of the table whose right edge passes the screen or its scrolling box (as the page opens)."""
    return page.evaluate(
        """(table) => {
            const t = document.querySelector(table);
            const box = t.closest('.table-wrap') || t;
            const edge = Math.min(window.innerWidth, box.getBoundingClientRect().right);
            return [...t.querySelectorAll('th, td')].filter(c => {
                const r = c.getBoundingClientRect();
                return r.width > 0 && r.right > edge + 1;
            }).map(c => c.textContent.trim().slice(0, 30));
        }""",
        table,
    )


def test_the_releases_table_fits_a_phone_with_the_rest_behind_the_toggle(
    browser_page, live_server, media_root, maintainer
):
    page, base = browser_page, live_server.url
    old = pset_import(root=DEMO_PSET, version_name="demo-0.9.0", publish=True).version
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    version_deprecate(version=old, actor=maintainer, note="superseded by 1.0.0")
    version_draft_create(name="demo-1.1.0", actor=maintainer)  # a maintainer sees drafts too
    page.set_viewport_size(PHONE)
    sign_in(page, base, maintainer)
    page.goto(f"{base}/")
    table = "#releases"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "home-releases.png"), full_page=True)
    assert cut_cells(page, table) == [], "at 390 px the release and its status fit"
    for column in ("Release", "Status"):
        expect(page.locator(f"{table} thead th", has_text=column)).to_be_visible()
    folded = page.locator(f"{table} thead th", has_text="Published")
    expect(folded).to_be_hidden()
    page.locator(f".table-wrap:has({table}) .show-folded").check()
    expect(folded).to_be_visible()
    expect(page.locator(f"{table} tbody tr", has_text="demo-0.9.0")).to_contain_text("Deprecated")
