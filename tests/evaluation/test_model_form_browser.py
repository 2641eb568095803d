"""In a real browser: choosing "I upload its generations" hides the fields only a called model uses, and choosing
the platform call shows them again (CSS alone, no script)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.evaluation.test_upload_browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.mark.parametrize("width", [1366, 390])
def test_uploaded_kind_hides_the_call_fields(browser_page, live_server, author, width):
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, base, author)
    page.goto(f"{base}/models/new/")
    called = [
        page.get_by_label("litellm model"),
        page.get_by_label("API base URL"),
        page.get_by_role("textbox", name="API key"),
    ]
    for field in called:
        expect(field).to_be_visible()
    page.get_by_label("I upload its generations").check()
    for field in called:
        expect(field).to_be_hidden()
    expect(page.get_by_label("Display name")).to_be_visible()
    page.get_by_label("The platform calls it with my API key").check()
    for field in called:
        expect(field).to_be_visible()
