"""Celery entry points of validation (FORMAT.md section 9): a revision's, each check saved as it finishes, and one
paper of a set validation; the sandbox checks themselves are in submissions/validation.py."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from benchmarks.paper2code.markers import AnnotatedFile
from benchmarks.paper2code.pset import EXAMPLE_SCRIPT_KEY, PaperPackage
from benchmarks.selectors import package_load
from common.text import storable
from operations.watchdog import database_outage_outlasted
from sandbox import SandboxError
from submissions import answers, mutation_spread, services, validation
from submissions.models import Revision, SetValidationPaper, TriedAnswer, ValidationCheck, ValidationReport
from submissions.proposed import TESTS_PROPOSED_FROM
from submissions.validation import sandbox_checks

logger = logging.getLogger(__name__)
Status = ValidationReport.Status
MIN_PAPER_WORDS = 100


def checks_plan(
    report: ValidationReport,
    annotated: Mapping[str, AnnotatedFile],
    example_script: str = "",
    *,
    has_tests: bool = True,
) -> None:
    """Create every check as pending, so the page shows the whole list from the start. Without tests of its own
    (`has_tests` False), the example script runs first: the tests proposed from it become the package's."""
    rows = [
        ("paper", "Paper text is present and non-trivial", "", ""),
        ("markers", "Snippet markers are valid", "", ""),
        ("requirements", "Requirements install", "", ""),
    ]
    if not has_tests:
        rows.append(
            (
                "example",
                f"No tests of its own: the tests proposed from the example script {example_script or '(none named)'} "
                "become its tests",
                "",
                "",
            )
        )
    rows.append(
        (
            "reference",
            f"Reference passes all {settings.SUBMISSION_REFERENCE_RUNS} runs of its "
            + ("tests" if has_tests else "proposed tests")
            + " (none flaky)",
            "",
            "",
        )
    )
    if example_script and has_tests:
        rows.append(("example", f"The example script {example_script} runs and its calls are recorded", "", ""))
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            rows.append((f"sealed:{path}:{s.index}", f'"{s.name}" is sealed: its calls replay alone', path, s.name))
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            rows.append(
                (
                    f"judged:{path}:{s.index}",
                    f'The reference of "{s.name}" passes as an answer, twice, with no flag',
                    path,
                    s.name,
                )
            )
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            rows.append((f"masked:{path}:{s.index}", f'Masking "{s.name}" makes the tests fail', path, s.name))
            rows.append((f"noop:{path}:{s.index}", f'A no-op "{s.name}" makes the tests fail', path, s.name))
    if settings.SUBMISSION_MUTANTS:
        for path, parsed in annotated.items():
            for s in parsed.snippets:
                rows.append(
                    (
                        f"mutation:{path}:{s.index}",
                        f'Mutation score of "{s.name}": the tests kill wrong bodies',
                        path,
                        s.name,
                    )
                )
    ValidationCheck.objects.bulk_create(
        [
            ValidationCheck(report=report, position=i, key=key, label=label, snippet_file=f, snippet_name=n)
            for i, (key, label, f, n) in enumerate(rows)
        ],
        ignore_conflicts=True,
    )


def example_script_of(revision: Revision) -> str:
    """The example script a revision names (papers.yaml `example_script`), '' when none."""
    return str(revision.metadata.get(EXAMPLE_SCRIPT_KEY) or "")


def _set(
    report: ValidationReport,
    key: str,
    status: str,
    detail: str = "",
    duration: float | None = None,
    result: dict | None = None,
    warning: str = "",
) -> None:
    ValidationCheck.objects.filter(report=report, key=key).update(
        **storable(dict(status=status, detail=detail[-8000:], duration=duration, result=result, warning=warning))
    )


@shared_task(bind=True, max_retries=2)
@database_outage_outlasted
def revision_validate(self, report_id: int) -> str:
    report = ValidationReport.objects.select_related("revision__submission").get(pk=report_id)
    if report.status not in (Status.PENDING, Status.RUNNING):  # a redelivered or re-dispatched copy: done already
        return report.status
    spread = not self.request.is_eager  # on a worker the mutants go to every worker; a caller's own process runs them
    if spread and report.status == Status.RUNNING and mutation_spread.mutation_resumable(report=report):
        mutation_spread.mutation_dispatch(report=report)  # re-dispatched while its mutants were out: only those
        return Status.RUNNING
    package = package_load(report.revision)  # the very package acceptance stores as the Task
    checks_plan(
        report,
        package.annotated,
        example_script_of(report.revision),
        has_tests=package.test_entry_point in package.files,
    )
    ValidationReport.objects.filter(pk=report.pk).update(status=Status.RUNNING, started_at=timezone.now())
    try:
        status = _validate(report, package, report.revision.annotated_paths, mutants_spread=spread)
    except SandboxError as exc:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5) from exc
        logger.exception("validation of report %s failed on infrastructure", report_id)
        ValidationCheck.objects.filter(report=report, status__in=[Status.PENDING, Status.RUNNING]).update(
            status=Status.ERROR, detail=f"the sandbox failed: {exc}; nothing is wrong with the submission"
        )
        status = Status.ERROR
    if status == Status.RUNNING:  # its mutants are out on the workers: the last of them ends the report
        return status
    # Only the copy that ends the running report moves the submission on; any other finds it finished.
    if ValidationReport.objects.filter(pk=report.pk, status=Status.RUNNING).update(
        status=status, finished_at=timezone.now()
    ):
        report.refresh_from_db()
        services.validation_finish(report=report)
    return status


def _validate(report, package: PaperPackage, annotated_paths: list[str], *, mutants_spread: bool = False) -> str:
    """The report's checks in turn; with `mutants_spread`, its mutation checks are queued for the workers once the
    others are stored, and RUNNING says they are out (submissions/mutation_spread.py)."""
    ok = True
    files, annotated = dict(package.files), package.annotated
    paper = files.get(package.paper_path, b"").decode("utf-8", "replace")
    words = len(paper.split())
    if words >= MIN_PAPER_WORDS:
        _set(report, "paper", Status.PASSED, f"{words} words")
    else:
        ok = False
        _set(
            report,
            "paper",
            Status.FAILED,
            f"{package.paper_path or 'the paper'} has {words} words; at least {MIN_PAPER_WORDS} are expected",
        )
    problems = [str(p) for a in annotated.values() for p in a.problems]
    missing = [p for p in annotated_paths if p not in files]
    empty = [p for p, a in annotated.items() if not a.snippets]
    marker_errors = (
        [str(p) for a in annotated.values() for p in a.errors]
        + [f"{p}: file not found" for p in missing]
        + [f"{p}: no snippet markers" for p in empty]
    )
    if marker_errors:
        _set(report, "markers", Status.FAILED, "\n".join(marker_errors + [w for w in problems if "warning" in w]))
        ValidationCheck.objects.filter(report=report, status=Status.PENDING).update(
            status=Status.SKIPPED, detail="not run: the markers must be valid first"
        )
        return Status.FAILED
    _set(
        report,
        "markers",
        Status.PASSED,
        "\n".join(problems) or f"{sum(len(a.snippets) for a in annotated.values())} snippets",
    )

    for check in sandbox_checks(
        files=files,
        annotated=annotated,
        requirements=package.requirements,
        test_entry_point=package.test_entry_point,
        mutants=0 if mutants_spread else settings.SUBMISSION_MUTANTS,
        score_min=validation.mutation_score_min(),
        example_script=example_script_of(report.revision),
        paper=f"{package.id} (revision r{report.revision.number})",
    ):
        if check.backend:
            ValidationReport.objects.filter(pk=report.pk).update(sandbox_backend=check.backend)
        if check.manifest is not None:
            Revision.objects.filter(pk=report.revision_id).update(test_manifest=storable(check.manifest))
        if check.recording is not None:
            Revision.objects.filter(pk=report.revision_id).update(recording=storable(check.recording))
        if check.tests_made is not None:  # the proposed tests became its tests: acceptance keeps them with its files
            revision = report.revision
            Revision.objects.filter(pk=revision.pk).update(
                files={**revision.files, **check.tests_made},
                source={**revision.source, TESTS_PROPOSED_FROM: example_script_of(revision)},
            )
        _set(report, check.key, check.status, check.detail, check.duration, check.result, check.warning)
        if check.blocks:
            ValidationCheck.objects.filter(report=report, status=Status.PENDING).update(
                status=Status.SKIPPED, detail=check.blocks
            )
            return Status.FAILED
        ok = ok and check.status == Status.PASSED
    if mutants_spread and settings.SUBMISSION_MUTANTS and mutation_spread.mutation_pending(report=report):
        mutation_spread.mutation_dispatch(report=report)
        return Status.RUNNING
    return Status.PASSED if ok else Status.FAILED


@shared_task(bind=True, max_retries=2)
@database_outage_outlasted
def revision_mutants(self, report_id: int, key: str) -> str:
    """One snippet's mutants of a revision's validation (`key`: its mutation check), on the `sandbox` queue beside
    the other snippets' on every worker; the task that stores the last of them ends the report."""
    report = ValidationReport.objects.select_related("revision__submission").get(pk=report_id)
    if report.status != Status.RUNNING:  # a redelivered copy of a report ended already
        return report.status
    try:
        stored = mutation_spread.snippet_mutation_run(report=report, key=key)
        # Which worker ran it is for operations (the log), not the author's report.
        logger.info(
            "mutants %s of validation report %s %s on %s pid %s",
            key,
            report_id,
            "stored" if stored else "skipped (done, or run by another copy)",
            self.request.hostname,
            os.getpid(),
        )
    except SandboxError as exc:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5) from exc
        logger.exception("mutants %s of report %s failed on infrastructure", key, report_id)
        mutation_spread.snippet_mutation_error(
            report=report, key=key, detail=f"the sandbox failed: {exc}; nothing is wrong with the submission"
        )
    return mutation_spread.mutation_gather(report=report) or Status.RUNNING


@shared_task(bind=True, max_retries=2)
@database_outage_outlasted
def set_paper_validate(self, paper_id: int) -> str:
    """One paper of a set validation (validate_pset --workers, or a draft version's page)."""
    paper = SetValidationPaper.objects.select_related("validation").get(pk=paper_id)
    if paper.status not in (Status.PENDING, Status.RUNNING):  # a redelivered or re-dispatched copy: done already
        return paper.status
    try:
        return validation.set_paper_run(paper=paper)
    except SandboxError as exc:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5) from exc
        logger.exception("set validation of paper %s failed on infrastructure", paper_id)
        validation.set_paper_error(paper=paper, detail=f"the sandbox failed: {exc}")
    except (OperationalError, InterfaceError):
        raise  # the database is away: the decorator waits for it, past that the watchdog queues the paper again
    except Exception as exc:  # e.g. a stored file missing: the paper ends as an error the page shows
        logger.exception("set validation of paper %s failed", paper_id)
        validation.set_paper_error(
            paper=paper, detail=f"the platform failed on this paper: {type(exc).__name__}: {exc}"
        )
    return Status.ERROR


@shared_task(bind=True, max_retries=2)
@database_outage_outlasted
def tried_answer_judge(self, tried_id: int) -> str:
    """Judge an answer an author or maintainer tried on a revision (submissions/answers.py), on the `sandbox` queue."""
    tried = TriedAnswer.objects.select_related("revision").get(pk=tried_id)
    try:
        return answers.tried_answer_judge_run(tried=tried)
    except SandboxError as exc:
        TriedAnswer.objects.filter(pk=tried.pk, status=TriedAnswer.Status.RUNNING).update(
            status=TriedAnswer.Status.PENDING
        )
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5) from exc
        logger.exception("tried answer %s failed on infrastructure", tried_id)
        return answers.tried_answer_error(
            tried=tried, detail=f"the sandbox failed: {exc}; nothing is known about this answer, try it again"
        )


@shared_task
def drafts_prune() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE): delete abandoned empty drafts."""
    removed = services.drafts_abandoned_remove(older_than=timedelta(days=settings.SUBMISSION_DRAFT_ABANDONED_DAYS))
    logger.info("deleted %d abandoned empty draft(s)", removed)
    return removed
