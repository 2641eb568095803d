"""Small things a visitor meets (issue 22): the API docs lead back to the site, the run page's columns are named
apart, and a new API token can be copied with a button while its box stays selectable."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_api_docs_link_back_to_the_site(client):
    body = client.get(reverse("api-docs")).content.decode()
    assert f'<a href="{reverse("home")}">← Research-code benchmark</a>' in body
    assert 'id="swagger-ui"' in body  # still Swagger UI


def test_the_run_page_names_its_columns_apart(client, media_root):
    from benchmarks.services.psets import pset_import
    from tests.conftest import DEMO_PSET
    from tests.leaderboard.test_leaderboard_browser import calibrate

    run = calibrate(pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version, "strong", passed=True)
    body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    head = body[body.index("<h2>Scores</h2>") :]
    head = head[: head.index("</thead>")]
    assert head.count(">Items</th>") == 1 and '<th scope="col">Paper or split</th>' in head


def test_a_new_token_comes_with_a_copy_button_and_a_selectable_box(client, author):
    client.force_login(author)
    body = client.post(reverse("api-tokens"), {"action": "create"}).content.decode()
    assert 'id="token-key" type="text" readonly' in body
    assert 'data-copy-from="token-key"' in body and "js/copy.js" in body
    assert "js/copy.js" not in client.get(reverse("api-tokens")).content.decode()  # no key, nothing to copy


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("width", [1366, 390])
def test_the_copy_button_puts_the_token_on_the_clipboard(browser_page, live_server, author, width):
    from rest_framework.authtoken.models import Token

    from tests.benchmarks.test_phone_width_browser import overflow, too_wide
    from tests.evaluation.test_upload_browser import sign_in

    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    sign_in(page, base, author)
    page.goto(f"{base}/accounts/tokens/")
    page.get_by_role("button", name="Create a token").click()
    key = Token.objects.get(user=author).key
    assert page.get_by_role("textbox", name="Token").input_value() == key
    page.get_by_role("button", name="Copy").click()
    page.get_by_text("Copied to the clipboard.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == key
    # Still selectable by hand: the box is a readonly text input, not hidden text.
    assert (
        page.evaluate(
            "(() => { const i = document.getElementById('token-key'); i.select();"
            " return i.value.substring(i.selectionStart, i.selectionEnd); })()"
        )
        == key
    )
    assert overflow(page) <= 0, too_wide(page)
