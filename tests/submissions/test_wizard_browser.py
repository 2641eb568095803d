"""In a real browser (Debian's Chromium driven by Playwright): after an archive upload the wizard's files step says
what the archive gave (files found, each step's source, annotated files detected by their markers, a malformed
marker line), and the annotated file is preselected; a review page warns before acceptance replaces a paper id.
At desktop and phone width; screenshots go to test-artifacts/wizard/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from submissions import services
from submissions.models import Submission, ValidationCheck, ValidationReport
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import REPO
from tests.evaluation.test_upload_browser import sign_in
from tests.submissions.conftest import demo_files
from tests.submissions.test_mutation_wording import RESULT
from tests.submissions.test_wizard_feedback import MALFORMED, _awaiting, _zip

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "wizard"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_files_step_says_what_the_archive_gave(browser_page, live_server, media_root, author, tmp_path, width):
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    submission = services.submission_create(author=author, values={"metadata": {"title": "Damp", "id": "dampnest"}})
    archive = tmp_path / "dampnest-main.zip"
    archive.write_bytes(_zip({**demo_files("dampnest"), "extra.py": MALFORMED}).getvalue())
    sign_in(page, base, author)

    page.goto(f"{base}/submissions/{submission.pk}/edit/code/")
    page.get_by_label("An archive (.zip or .tar.gz)").check()
    page.get_by_label("Archive (.zip, .tar.gz)").set_input_files(str(archive))
    page.get_by_role("button", name="Save and continue").click()
    intake = page.get_by_test_id("intake")
    expect(intake).to_contain_text("6 files found. Not a problem set: it has no papers.yaml")
    expect(intake).to_contain_text("from paper2code_paper.md in the code")
    expect(intake).to_contain_text("preselected below as an annotated file")
    expect(intake).to_contain_text("line 2 looks like its start marker but is malformed")
    expect(page.get_by_role("checkbox", name="optimizer.py").first).to_be_checked()
    assert page.url == f"{base}/submissions/{submission.pk}/edit/files/", "the address follows the step (walk 4)"
    page.screenshot(path=str(ARTIFACTS / f"files-step-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    assert Submission.objects.get(pk=submission.pk).draft["annotated_paths"] == ["optimizer.py"]


def test_the_review_page_warns_before_replacing_a_paper_id(browser_page, live_server, media_root, author, maintainer):
    page, base = browser_page, live_server.url
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    services.submission_accept(submission=_awaiting(author, media_root, "DampNest"), actor=maintainer, reason="ok")
    second = _awaiting(author, media_root, "Another paper")
    sign_in(page, base, maintainer)
    page.goto(f"{base}/review/{second.pk}/")
    expect(page.get_by_test_id("paper-exists")).to_contain_text("Paper id dampnest is already in draft")
    page.get_by_label("Accept").check()
    page.get_by_label("Reason (sent to the author)").fill("Fine.")
    page.get_by_role("button", name="Record decision").click()
    expect(page.locator(".errors")).to_contain_text("confirm the replacement")
    page.screenshot(path=str(ARTIFACTS / "review-replace-refused.png"), full_page=True)
    page.get_by_label("Replace the draft's task of the same paper id").check()
    page.get_by_label("Reason (sent to the author)").fill("Fine.")
    expect(page.get_by_test_id("paper-matches")).to_contain_text("dampnest")  # the same files: one paper once
    page.get_by_label("Why it is not a duplicate").fill("The same paper, retitled.")
    page.get_by_label("Accept").check()
    page.get_by_role("button", name="Record decision").click()
    expect(page.get_by_test_id("state")).to_have_text("Accepted")


@pytest.mark.parametrize("width", [1280, 390])
def test_an_empty_paper_step_shows_its_error_in_view(browser_page, live_server, media_root, author, width):
    page, base = browser_page, live_server.url
    page.set_viewport_size({"width": width, "height": 700})
    submission = services.submission_create(author=author, values={"metadata": {"title": "Damp", "id": "dampnest"}})
    sign_in(page, base, author)
    page.goto(f"{base}/submissions/{submission.pk}/edit/paper/")
    page.get_by_role("button", name="Save and continue").click()
    alert = page.locator("#step-form div.errors[role=alert]")
    expect(alert).to_contain_text("This step is empty")
    expect(alert).to_be_in_viewport()
    assert page.url.endswith("/edit/paper/")


def test_the_validation_report_is_readable_at_phone_width(browser_page, live_server, draft, author):
    """Walk 4: at 390 px the report's three columns left a mutation score's sentences a third of the width, a few
    words a line. On a phone each check stacks: its label beside its status, its details the whole width below."""
    page, base = browser_page, live_server.url
    report = ValidationReport.objects.get(revision=services.submission_submit(submission=draft, actor=author))
    survivor = "3: denom = exp_avg_sq.sqrt().add_(group['eps']) -> denom = exp_avg_sq.sqrt().add_(group['eps'] * 2)"
    ValidationCheck.objects.create(report=report, position=0, key="reference", label="Reference", status="passed")
    ValidationCheck.objects.create(
        report=report,
        position=1,
        key="mutation:optimizer.py:0",
        label='Mutation score of "initialise optimiser state on first step": the tests kill wrong bodies',
        status="passed",
        result={**RESULT, "counted": 4, "survived": 1, "survivors": [survivor]},
        warning="the score is below 90%: a surviving mutant is a wrong body the tests accept",
        detail="x" * 400,
    )
    ValidationReport.objects.filter(pk=report.pk).update(status="passed")
    sign_in(page, base, author)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/submissions/{draft.pk}/")
    page.locator("#report details").first.evaluate("e => e.open = true")
    details = page.locator('tr[data-check^="mutation:"] td').nth(2)
    expect(details).to_contain_text("Mutation score")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report-390.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)
    box = details.bounding_box()
    assert box["width"] >= 300 and box["x"] + box["width"] <= 390, f"the details take {box} of 390 px"
    label, badge = (page.locator('tr[data-check^="mutation:"] td').nth(i).bounding_box() for i in (0, 1))
    assert badge["y"] < label["y"] + label["height"], "the status sits beside its check's label"
