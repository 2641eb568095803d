"""Submitting starts validation (FORMAT.md 9); good packages reach review, bad ones say why; acceptance makes a Task."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkVersion, Task
from submissions import services
from submissions.models import Submission, ValidationCheck, ValidationReport
from submissions.tasks import revision_validate
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db


def validate(submission: Submission, author, **draft_values) -> ValidationReport:
    if draft_values:
        fill_draft(submission, author, **draft_values)
    revision = services.submission_submit(submission=submission, actor=author)
    revision_validate.apply(args=(revision.report.pk,), throw=True)
    return ValidationReport.objects.get(pk=revision.report.pk)


def checks(report: ValidationReport) -> dict[str, tuple[str, str]]:
    return {c.key: (c.status, c.detail) for c in report.checks.all()}


def test_demo_paper_validates_and_acceptance_adds_it_to_the_draft_version(draft, author, maintainer, sandbox):
    report = validate(draft, author)
    assert report.status == "passed", checks(report)
    assert report.checks.count() == 4 + 4 * 12
    assert set(report.checks.values_list("status", flat=True)) == {"passed"}
    # Every snippet of the demo's optimiser is sealed: its calls of DampNest.step replay as recorded.
    sealing = {key: detail for key, (_, detail) in checks(report).items() if key.startswith("sealed:")}
    assert len(sealing) == 12 and all(d.startswith("sealed: ") and "DampNest.step" in d for d in sealing.values())
    # Each reference, judged as an answer by evaluation's step twice, passes: evaluation will score it as validated.
    judged = {key: detail for key, (_, detail) in checks(report).items() if key.startswith("judged:")}
    assert len(judged) == 12 and all(
        d.startswith("judged as an answer 2 times: passed each time") for d in judged.values()
    )
    draft.refresh_from_db()
    assert draft.state == Submission.State.AWAITING_REVIEW

    # The reference's run recorded the revision's test manifest, which acceptance carries to the task.
    manifest = draft.latest_revision.test_manifest
    assert manifest["runner"] == "unittest" and manifest["tests"] and set(manifest["tests"].values()) == {"passed"}
    assert "completing the same" in checks(report)["reference"][1]

    task = services.submission_accept(submission=draft, actor=maintainer, reason="clean and well tested")

    assert Task.objects.get(pk=task.pk).snippets.count() == 12
    assert Task.objects.get(pk=task.pk).test_manifest == manifest
    recording = Task.objects.get(pk=task.pk).recording
    assert recording == draft.latest_revision.recording and recording["snippets"]
    assert all(entry["sealed"] for entry in recording["snippets"].values())
    version = BenchmarkVersion.objects.get(status=BenchmarkVersion.Status.DRAFT)
    assert list(version.tasks.all()) == [task]
    assert Submission.objects.get(pk=draft.pk).task == task


def test_changes_requested_then_a_revision_validates_again(draft, author, maintainer, sandbox):
    validate(draft, author)
    services.submission_request_changes(submission=draft, actor=maintainer, reason="name the snippets better")
    revision = services.submission_submit(submission=draft, actor=author, note="renamed them")
    assert revision.number == 2 and Submission.objects.get(pk=draft.pk).state == Submission.State.VALIDATING


def test_tests_that_pass_with_a_snippet_masked_mark_it_uncovered(draft, author, sandbox):
    files = demo_files()
    test = files["paper2code_test.py"].decode()
    # A test that only imports the module covers nothing.
    files["paper2code_test.py"] = b"import optimizer\nprint('ok')\n"
    report = validate(draft, author, files=services.draft_files_store(files))
    assert test and report.status == "failed"
    uncovered = ValidationCheck.objects.filter(report=report, status="failed", key__startswith="masked:")
    assert uncovered.count() == 12
    assert "do not cover this snippet" in uncovered.first().detail
    assert Submission.objects.get(pk=draft.pk).state == Submission.State.INVALID


def test_invalid_markers_are_reported_with_file_and_line(draft, author, sandbox):
    files = demo_files()
    lines = files["optimizer.py"].decode().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if "</paper2code" in line)
    files["optimizer.py"] = "".join(lines[:end] + lines[end + 1 :]).encode()
    report = validate(draft, author, files=services.draft_files_store(files))
    status, detail = checks(report)["markers"]
    assert status == "failed" and "optimizer.py:" in detail and "never closed" in detail
    assert checks(report)["reference"][0] == "skipped"


def test_tests_that_never_finish_time_out(draft, author, sandbox, settings):
    settings.SUBMISSION_TEST_SECONDS = 2
    files = demo_files()
    files["paper2code_test.py"] = b"import time\nwhile True:\n    time.sleep(0.1)\n"
    report = validate(draft, author, files=services.draft_files_store(files))
    status, detail = checks(report)["reference"]
    assert status == "failed" and "time limit" in detail


def test_requirements_that_fail_to_install_are_shown(draft, author, sandbox):
    files = {**demo_files(), "paper2code_requirements.txt": b"this-package-does-not-exist-rcb==1.0\n"}
    report = validate(draft, author, files=services.draft_files_store(files))
    status, detail = checks(report)["requirements"]
    assert status == "failed" and "this-package-does-not-exist-rcb" in detail


def test_an_empty_paper_fails_the_paper_check(draft, author, sandbox):
    files = demo_files()
    files["paper2code_paper.md"] = b""
    report = validate(draft, author, files=services.draft_files_store(files))
    status, detail = checks(report)["paper"]
    assert status == "failed" and "0 words" in detail


def test_an_incomplete_draft_cannot_be_submitted(author, media_root):
    submission = services.submission_create(author=author)
    with pytest.raises(services.TransitionError, match="title is missing"):
        services.submission_submit(submission=submission, actor=author)
    assert Submission.objects.get(pk=submission.pk).state == Submission.State.DRAFT
    assert not submission.revisions.exists()


def test_the_entry_point_validation_runs_is_the_one_the_task_runs(draft, author, maintainer, sandbox, client):
    """FORMAT.md 1: `python paper2code_test.py`, from the form through validation and acceptance to the Task."""
    from evaluation.executor import item_execute

    client.force_login(author)
    files = {**demo_files(), "run_other.py": b"raise SystemExit('not the entry point')\n"}
    fill_draft(draft, author, files=services.draft_files_store(files))
    step = reverse("submission-step", args=[draft.pk, "files"])
    page = client.get(step).content.decode()
    assert "<code>paper2code_test.py</code>" in page and 'name="test_entry_point"' not in page
    saved = client.post(
        step, {"annotated_paths": ["optimizer.py"], "requirements": "numpy\n", "test_entry_point": "run_other.py"}
    )  # no such field: the choice is not the author's
    assert saved.status_code == 302
    report = validate(draft, author)
    assert report.status == "passed", checks(report)
    assert report.revision.test_entry_point == "paper2code_test.py"
    assert checks(report)["reference"][1].startswith("python paper2code_test.py passed")

    task = services.submission_accept(submission=draft, actor=maintainer, reason="well tested")
    assert task.test_entry_point == report.revision.test_entry_point
    snippet = task.snippets.order_by("pk").first()
    assert item_execute(snippet=snippet, code=snippet.reference_code).verdict.status == "passed"
    assert item_execute(snippet=snippet, code="").verdict.status == "failed"


def test_code_without_paper2code_test_py_cannot_be_submitted(draft, author):
    files = {("run_tests.py" if p == "paper2code_test.py" else p): d for p, d in demo_files().items()}
    fill_draft(draft, author, files=services.draft_files_store(files))
    with pytest.raises(
        services.TransitionError,
        match="missing test entry point paper2code_test.py: write your tests there, or name an example script",
    ):
        services.submission_submit(submission=draft, actor=author)
