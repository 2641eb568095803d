"""Walk 38 (a newcomer revising a submission in Chromium): what the submission form kept and offered."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.urls import reverse

from submissions.packages import draft_requirements
from tests.conftest import page_text
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db
TYPED = "numpy\nscipy>=1.10\n"


def _archive(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    buffer.seek(0)
    buffer.name = "code-r2.zip"
    return buffer


def _code_upload(client, submission, files: dict[str, bytes]):
    return client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": _archive(files)}
    )


def test_new_code_without_a_requirements_file_keeps_the_typed_requirements_and_says_so(client, draft, author):
    draft = fill_draft(draft, author, requirements=TYPED)
    client.force_login(author)
    code = {p: d for p, d in demo_files().items() if p != "paper2code_requirements.txt"}
    response = _code_upload(client, draft, code)
    assert response.status_code == 302, page_text(response.content.decode())[-1500:]
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == TYPED
    page = client.get(reverse("submission-step", args=[draft.pk, "files"])).content.decode()
    box = re.search(r'<textarea name="requirements"[^>]*>(.*?)</textarea>', page, re.S)
    assert box and "scipy&gt;=1.10" in box.group(1), box
    assert "kept from before: the new code has no requirements file" in page_text(page), page_text(page)[-2000:]


def test_a_whole_problem_set_without_a_requirements_file_keeps_them_too(client, draft, author):
    draft = fill_draft(draft, author, requirements=TYPED)
    client.force_login(author)
    entry = "- id: dampnest\n  title: DampNest\n  annotated_file_paths: optimizer.py\n"
    code = {f"dampnest/{p}": d for p, d in demo_files().items() if p != "paper2code_requirements.txt"}
    assert _code_upload(client, draft, {"papers.yaml": entry.encode(), **code}).status_code == 302
    draft.refresh_from_db()
    assert draft.draft["intake"]["problem_set"]
    assert draft_requirements(draft.draft["files"]) == TYPED


def test_new_code_with_its_own_requirements_file_wins_and_says_what_it_replaced(client, draft, author):
    draft = fill_draft(draft, author, requirements=TYPED)
    client.force_login(author)
    code = {**demo_files(), "paper2code_requirements.txt": b"numpy>=1.26\n"}
    assert _code_upload(client, draft, code).status_code == 302
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == "numpy>=1.26\n"
    text = page_text(client.get(reverse("submission-step", args=[draft.pk, "files"])).content.decode())
    assert "from paper2code_requirements.txt in the new code, replacing the requirements held before" in text, text
    assert "scipy>=1.10" in text  # what was replaced is named


def _revision(submission, author, *, files: dict[str, bytes], status: str, **metadata):
    """A new revision of `submission` holding `files`, its validation ended with `status`."""
    from submissions import services
    from submissions.models import Submission, ValidationReport

    submission.refresh_from_db()
    if submission.revisions.exists():
        Submission.objects.filter(pk=submission.pk).update(state=Submission.State.INVALID)
        services.submission_edit(submission=submission, actor=author)
        submission.refresh_from_db()
    fill_draft(
        submission,
        author,
        metadata={**submission.draft["metadata"], **metadata},
        files=services.draft_files_store(files),
    )
    revision = services.submission_submit(submission=submission, actor=author)
    ValidationReport.objects.filter(revision=revision).update(status=status)
    return revision


def test_the_review_page_compares_with_the_last_revision_that_passed_validation(client, draft, author, maintainer):
    """r1 passed; r2 edited the test file, title and venue but lost its requirements and failed; r3 put them back.
    Compared with r2, the reviewer saw only "requirements added"; compared with r1, the real changes."""
    from submissions.models import Submission

    r1_files = demo_files()
    _revision(draft, author, files=r1_files, status="passed")
    r2_files = {p: d for p, d in r1_files.items() if p != "paper2code_requirements.txt"}
    r2_files["paper2code_test.py"] = r1_files["paper2code_test.py"] + b"\n# an edge case at a tiny norm\n"
    _revision(draft, author, files=r2_files, status="failed", title="DampNest, clearer", venue="DEMO2026")
    _revision(draft, author, files={**r2_files, "paper2code_requirements.txt": b"numpy\n"}, status="passed")
    Submission.objects.filter(pk=draft.pk).update(state=Submission.State.AWAITING_REVIEW)
    client.force_login(maintainer)
    html = client.get(reverse("review-detail", args=[draft.pk])).content.decode()
    text = " ".join(page_text(html).split())
    assert "Revision r3: what changed since r1" in text, text[:3000]
    assert "Compared with r1, the last revision that passed validation (r2 failed it)." in text
    assert "venueDEMO2025 → DEMO2026" in text and "Demo dampnest → DampNest, clearer" in text
    assert re.search(r"files changed\s*paper2code_test\.py", text)
    assert "requirements" not in text.split("Revision r3")[1].split("Requirements")[0]  # not "requirements added"
    assert "Changes since r1" in text and "r1/paper2code_test.py" in text and "an edge case at a tiny norm" in text


def test_step_4_offers_the_same_context_files_when_it_comes_back_with_a_form_error(client, draft, author):
    client.force_login(author)
    url = reverse("submission-step", args=[draft.pk, "files"])
    offered = re.findall(r'name="context_paths" value="([^"]+)"', client.get(url).content.decode())
    assert "optimizer_ref.py" not in offered and "paper2code_test.py" not in offered, offered
    response = client.post(url, {"annotated_paths": ["optimizer.py"], "requirements": "numpy\n--index-url x\n"})
    html = response.content.decode()
    assert "Line 2:" in page_text(html)  # the bad requirement line, refused
    again = re.findall(r'name="context_paths" value="([^"]+)"', html)
    assert again == offered, (again, offered)
    for path in ("optimizer.py", "optimizer_ref.py", "paper2code_test.py"):
        assert path not in again


def test_a_forbidden_context_file_posted_anyway_is_refused_with_its_reason_not_as_an_unknown_choice(
    client, draft, author
):
    client.force_login(author)
    url = reverse("submission-step", args=[draft.pk, "files"])
    response = client.post(url, {"annotated_paths": ["optimizer.py"], "context_paths": ["optimizer_ref.py"]})
    text = page_text(response.content.decode())
    assert "optimizer_ref.py cannot be a context file: it holds the reference code of optimizer.py" in text
    assert "not one of the available choices" not in text


def test_a_failed_validation_names_only_the_failed_checks_with_the_first_ones_reason(
    draft, author, django_capture_on_commit_callbacks
):
    from django.core import mail

    from submissions import services
    from submissions.models import Submission, ValidationCheck, ValidationReport

    revision = services.submission_submit(submission=draft, actor=author)
    report = revision.report
    traceback = (
        "failed all 2 runs; run 1: the tests failed (exit 1)\n--- stdout ---\n\n--- stderr ---\n"
        'Traceback (most recent call last):\n  File "paper2code_test.py", line 3, in <module>\n    import scipy\n'
        "ModuleNotFoundError: No module named 'scipy'\n"
    )
    for position, (key, label, status, detail) in enumerate(
        [
            ("markers", "Snippet markers are valid", "passed", ""),
            ("reference", "The reference passes its tests", "failed", traceback),
            ("masked", "Each masked snippet fails the tests", "skipped", "not run: the reference must pass first"),
            ("mutation", "Mutants of each snippet are killed", "skipped", "not run: the reference must pass first"),
        ]
    ):
        ValidationCheck.objects.create(
            report=report, position=position, key=key, label=label, status=status, detail=detail
        )
    ValidationReport.objects.filter(pk=report.pk).update(status="failed")
    report.refresh_from_db()
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.validation_finish(report=report)
    reason = Submission.objects.get(pk=draft.pk).history.latest("pk").reason
    assert reason == (
        "failed check: The reference passes its tests (ModuleNotFoundError: No module named 'scipy'); "
        "2 checks not run until it passes"
    ), reason
    assert reason in mail.outbox[-1].body
