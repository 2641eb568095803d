"""In a real browser (Debian's Chromium driven by Playwright): a maintainer validates a draft version from its page;
the queued validation's progress updates by htmx polling while a real worker (bwrap) runs it, and the finished
table names the snippet the tests do not cover. Screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.services.psets import pset_import
from submissions.models import SetValidation
from tests.submissions.test_browser import log_in, shot
from tests.submissions.test_validate_pset import legacy_pset

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_validate_a_draft_from_its_page(browser_page, live_server, maintainer, celery_worker_factory, tmp_path):
    page, base = browser_page, live_server.url
    environment = legacy_pset(tmp_path / "pset")
    version = pset_import(root=tmp_path / "pset", version_name="0.9.0", environment=environment.read_text()).version
    log_in(page, base, "maya", "pw-maya-12345")
    page.goto(base + reverse("version-detail", args=[version.name]))
    page.get_by_role("button", name="Validate every paper").click()
    status = page.get_by_test_id("validation-status")
    status.filter(has_text="Pending").wait_for()
    assert page.get_by_text("0 of 12 checks done (0%)").is_visible()
    assert page.get_by_role("button", name="Validate every paper").count() == 0  # one at a time
    shot(page, "set-validation-1-queued")
    celery_worker_factory(queues="sandbox", SANDBOX_BACKEND="bwrap", SUBMISSION_REFERENCE_RUNS="2")
    status.filter(has_text="Failed").wait_for(timeout=240_000)  # the page polls; nobody reloads it
    row = page.locator('tr[data-paper="legacy-sum"]')
    assert "print the values when debugging" in row.inner_text() and "1/2" in row.inner_text()
    assert page.get_by_text("12 of 12 checks done (100%)").is_visible()
    assert page.get_by_text('"print the values when debugging" (calc.py) masked: the tests still pass').is_visible()
    assert page.get_by_text("0 of 4 wrong bodies caught").is_visible()  # its mutation score
    shot(page, "set-validation-2-finished")
    assert SetValidation.objects.get(version=version).papers.get().sandbox_backend == "bwrap"
