"""In a real browser (Debian's Chromium driven by Playwright): a model's owner uploads a JSONL of generations from
the model's page; a bad file is refused with every bad line listed and the choices kept, a good one becomes a run.
At desktop and phone width; screenshots go to test-artifacts/upload/."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client
from playwright.sync_api import expect

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun
from tests.api.conftest import reference_answers
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import DEMO_PSET, REPO
from tests.evaluation.test_upload_form import _bad_file

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "upload"


def sign_in(page, base: str, user) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "url": base,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
            }
        ]
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_an_owner_uploads_generations_from_the_model_page(
    browser_page, live_server, media_root, author, tmp_path, width, monkeypatch
):
    monkeypatch.setattr(
        services.uploads, "run_dispatch_later", lambda *, run: None
    )  # scoring is not this test's concern
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    release = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    sign_in(page, base, author)
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_bytes(_bad_file(release))
    good.write_bytes(reference_answers(release))

    page.goto(f"{base}/models/uploader/")
    form = page.locator("form[action$='/uploads/']")
    form.get_by_label("Generations (JSONL)").set_input_files(str(bad))
    form.get_by_label("The answers were made with the paper in the prompt").uncheck()
    form.get_by_role("button", name="Upload and score").click()
    problems = page.locator("#upload-problems")
    expect(problems).to_contain_text("nothing was stored")
    expect(problems.locator("li")).to_have_count(3)
    expect(problems.locator("li").nth(0)).to_contain_text("line 2: not JSON")
    expect(problems.locator("li").nth(1)).to_contain_text("line 3: unknown item id '999999'")
    expect(problems.locator("li").nth(2)).to_contain_text("line 4: answer has no fenced python block")
    expect(page.get_by_label("The answers were made with the paper in the prompt")).not_to_be_checked()
    page.screenshot(path=str(ARTIFACTS / f"refused-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    assert not EvaluationRun.objects.exists()

    form = page.locator("form[action$='/uploads/']")
    form.get_by_label("Generations (JSONL)").set_input_files(str(good))
    form.get_by_role("button", name="Upload and score").click()
    run = EvaluationRun.objects.get()
    page.wait_for_url(f"{base}/runs/{run.pk}/")
    expect(page.locator("ul.messages")).to_contain_text(f"stored as run {run.pk}")
    page.screenshot(path=str(ARTIFACTS / f"accepted-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    assert run.provenance == "self_reported" and not run.with_paper
