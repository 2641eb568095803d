"""In a real browser: the run-start form shows the agent budget only in agent mode (a small script), each field with
the release's maximum beside it; without JavaScript the budget stays shown and a single-shot start ignores it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.services.psets import pset_import
from evaluation.models import EvaluationRun
from tests.conftest import DEMO_PSET
from tests.evaluation.test_upload_browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_the_budget_shows_only_in_agent_mode(browser_page, live_server, maintainer, media_root):
    page, base = browser_page, live_server.url
    pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True)
    sign_in(page, base, maintainer)
    page.goto(f"{base}/models/reference/")
    turns = page.get_by_label("Turns per item")
    expect(page.get_by_label("Mode")).to_have_value("single")
    expect(turns).to_be_hidden()
    page.get_by_label("Mode").select_option("agent")
    expect(turns).to_be_visible()
    expect(page.locator("#id_budget_turns_helptext")).to_contain_text("Blank: the release's maximum, 50 turns.")
    turns.fill("7")
    page.get_by_label("Mode").select_option("single")
    expect(turns).to_be_hidden()
    page.get_by_role("button", name="Start the run").click()
    page.wait_for_url("**/runs/*/")
    assert EvaluationRun.objects.get().agent_budget == {}, "a hidden budget is not sent"

    plain = page.context.browser.new_context(java_script_enabled=False)
    plain_page = plain.new_page()
    sign_in(plain_page, base, maintainer)
    plain_page.goto(f"{base}/models/reference/")
    expect(plain_page.get_by_label("Turns per item")).to_be_visible()
    plain_page.get_by_label("Turns per item").fill("7")
    plain_page.get_by_role("button", name="Start the run").click()
    plain_page.wait_for_url("**/runs/*/")
    assert EvaluationRun.objects.order_by("-pk").first().agent_budget == {}, "ignored server-side in single-shot"
    plain.close()
