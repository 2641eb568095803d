"""In a real browser (Debian's Chromium driven by Playwright): an author submits the demo paper as an archive and
sees validation pass; a maintainer requests changes, the author revises, the maintainer accepts; the task appears
in the draft version. Screenshots of every step go to test-artifacts/browser/."""

from __future__ import annotations

import zipfile

import pytest
from django.contrib.auth.models import Group, User

from config.celery import app as celery_app
from tests.conftest import DEMO_PSET, REPO

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "browser"


@pytest.fixture
def eager_validation():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def log_out(page) -> None:
    page.get_by_role("button", name="Log out").click()


def test_submit_validate_review_revise_accept(
    browser_page, live_server, media_root, sandbox, eager_validation, tmp_path
):
    page, base = browser_page, live_server.url
    maintainer = User.objects.create_user("maya", password="pw-maya-12345", email="maya@example.org")
    maintainer.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    folder = DEMO_PSET / "dampnest"
    archive = tmp_path / "dampnest.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".md":
                zf.write(path, f"dampnest-main/{path.relative_to(folder)}")

    # The author signs up and fills the form step by step.
    page.goto(f"{base}/accounts/signup/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Email address").fill("ada@example.org")
    page.get_by_label("Password", exact=True).fill("a-long-pass-phrase-9")
    page.get_by_label("Password confirmation").fill("a-long-pass-phrase-9")
    shot(page, "01-signup")
    page.get_by_role("button", name="Create account").click()
    page.get_by_role("link", name="Submit a new paper").click()
    page.get_by_label("Title").fill("DampNest: Curvature-Damped Momentum")
    page.get_by_label("Venue").fill("DEMO2025")
    shot(page, "02-details")
    page.get_by_role("button", name="Save and continue").click()
    page.get_by_label("Upload the paper's text").set_input_files(str(folder / "paper2code_paper.md"))
    shot(page, "03-paper")
    page.get_by_role("button", name="Save and continue").click()
    page.get_by_label("An archive (.zip or .tar.gz)").check()
    page.get_by_label("Archive (.zip, .tar.gz)").set_input_files(str(archive))
    shot(page, "04-code")
    page.get_by_role("button", name="Save and continue").click()
    page.locator('input[name=annotated_paths][value="optimizer.py"]').check()
    assert page.get_by_test_id("test-entry-point").inner_text().startswith("Test entry point: paper2code_test.py")
    page.get_by_label("Requirements (one per line)").fill("numpy\n")
    shot(page, "05-files")
    page.get_by_role("button", name="Save and continue").click()
    page.get_by_role("button", name="Submit for validation").click()
    status = page.get_by_test_id("report-status")
    status.filter(has_text="Passed").wait_for()
    assert page.get_by_test_id("state").inner_text() == "Awaiting review"
    shot(page, "06-validated")
    log_out(page)

    # The maintainer asks for a change.
    log_in(page, base, "maya", "pw-maya-12345")
    page.get_by_role("link", name="Review", exact=True).click()
    shot(page, "07-queue")
    page.get_by_role("link", name="DampNest: Curvature-Damped Momentum").click()
    page.get_by_label("Request changes").check()
    page.get_by_label("Reason (sent to the author)").fill("Please pin the numpy version.")
    shot(page, "08-review")
    page.get_by_role("button", name="Record decision").click()
    assert page.get_by_test_id("state").inner_text() == "Changes requested"
    log_out(page)

    # The author revises.
    log_in(page, base, "ada", "a-long-pass-phrase-9")
    page.get_by_role("link", name="My submissions").click()
    page.get_by_role("link", name="DampNest: Curvature-Damped Momentum").click()
    assert page.get_by_text("Please pin the numpy version.").first.is_visible()
    page.get_by_role("link", name="Edit the next revision").click()
    page.get_by_role("link", name="Files and tests").click()
    page.get_by_label("Requirements (one per line)").fill("numpy>=1.26\n")
    page.get_by_role("button", name="Save and continue").click()
    page.get_by_label("What changed (for the reviewers)").fill("Pinned numpy.")
    page.get_by_role("button", name="Submit revision").click()
    page.get_by_test_id("report-status").filter(has_text="Passed").wait_for()
    shot(page, "09-revised")
    log_out(page)

    # The maintainer sees the diff and accepts.
    log_in(page, base, "maya", "pw-maya-12345")
    page.goto(f"{base}/review/")
    page.get_by_role("link", name="DampNest: Curvature-Damped Momentum").click()
    assert page.get_by_role("heading", name="Changes since r1").is_visible()  # the last revision that passed
    page.get_by_label("Accept").check()
    page.get_by_label("Reason (sent to the author)").fill("Well covered by the tests.")
    page.get_by_role("button", name="Record decision").click()
    assert page.get_by_test_id("state").inner_text() == "Accepted"
    shot(page, "10-accepted")
    page.goto(f"{base}/")
    page.get_by_role("link", name="0.1.0").click()
    assert page.get_by_role("link", name="DampNest: Curvature-Damped Momentum").is_visible()
    shot(page, "11-draft-version")
