"""In a real browser (Debian's Chromium driven by Playwright), a newcomer's path past the README: register a model
and start a run from the web, then compare two models from the leaderboard's compare form; at desktop and phone
width. Screenshots go to test-artifacts/compare/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import DEMO_PSET, REPO
from tests.evaluation.test_upload_browser import sign_in
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "compare"


@pytest.mark.parametrize("width", [1280, 390])
def test_register_a_model_start_a_run_and_compare_two(
    browser_page, live_server, media_root, author, width, monkeypatch
):
    monkeypatch.setattr(services.runs, "run_dispatch", lambda *, run: 0)  # no worker here: the run stays queued
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    release = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    strong, weak = calibrate(release, "strong", passed=True), calibrate(release, "weak", passed=False)
    sign_in(page, base, author)

    page.goto(f"{base}/")
    page.get_by_role("link", name="Evaluate your model").click()
    page.get_by_label("Name", exact=True).fill("my-model")
    page.get_by_label("Display name").fill("My Model")
    page.get_by_label("litellm model").fill("openai/gpt-4o-mini")
    page.get_by_role("textbox", name="API key").fill("sk-newcomer")
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_role("heading", name="My Model")).to_be_visible()
    page.get_by_label("Release").first.select_option(label="1.0.0")
    page.get_by_role("button", name="Start the run").click()
    run = EvaluationRun.objects.get(model__name="my-model")
    assert page.url.endswith(f"/runs/{run.pk}/") and run.status == "queued" and run.provenance == "verified"
    page.screenshot(path=str(ARTIFACTS / f"{width}-run-started.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)

    page.goto(f"{base}/versions/1.0.0/leaderboard/")
    page.locator("#id_compare_a").select_option(str(strong.pk))
    page.locator("#id_compare_b").select_option(str(weak.pk))
    page.locator("#compare-form").get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name="Strong vs Weak on 1.0.0")).to_be_visible()
    cells = page.locator("#compare-summary tbody tr").first.locator("td").all_inner_texts()
    # 33 items, Strong passes all and Weak none: 100 points apart, 33 discordant one way, p = 2 * 0.5**33.
    assert cells[0] == "33" and cells[1].startswith("100.00") and cells[2:] == ["33", "0", "0.0000"], cells
    page.screenshot(path=str(ARTIFACTS / f"{width}-compare.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
