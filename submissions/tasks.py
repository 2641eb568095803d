"""Validation of a revision (FORMAT.md section 9), run by a Celery worker; each check is saved as it finishes."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from benchmarks.paper2code import mask, noop, splice
from benchmarks.paper2code.pset import PaperPackage
from benchmarks.services import environment_hash
from evaluation.executor import limits_default, package_test, session_for
from evaluation.sandbox import EnvironmentBuildError, SandboxError
from submissions import services
from submissions.models import ValidationCheck, ValidationReport
from submissions.packages import revision_package

logger = logging.getLogger(__name__)
Status = ValidationReport.Status
MIN_PAPER_WORDS = 100


def checks_plan(report: ValidationReport, annotated: dict) -> None:
    """Create every check as pending, so the page shows the whole list from the start."""
    rows = [("paper", "Paper text is present and non-trivial", "", ""),
            ("markers", "Snippet markers are valid", "", ""),
            ("requirements", "Requirements install", "", ""),
            ("reference", f"Reference passes its tests {settings.SUBMISSION_REFERENCE_RUNS} times in a row", "", "")]
    for path, parsed in annotated.items():
        for s in parsed.snippets:
            rows.append((f"masked:{path}:{s.index}", f'Masking "{s.name}" makes the tests fail', path, s.name))
            rows.append((f"noop:{path}:{s.index}", f'A no-op "{s.name}" makes the tests fail', path, s.name))
    ValidationCheck.objects.bulk_create([
        ValidationCheck(report=report, position=i, key=key, label=label, snippet_file=f, snippet_name=n)
        for i, (key, label, f, n) in enumerate(rows)
    ], ignore_conflicts=True)


def _set(report: ValidationReport, key: str, status: str, detail: str = "", duration: float | None = None) -> None:
    ValidationCheck.objects.filter(report=report, key=key).update(status=status, detail=detail[-8000:],
                                                                  duration=duration)


def _output(run) -> str:
    if run.result is None:
        return run.verdict.detail
    return f"{run.verdict.detail}\n--- stdout ---\n{run.result.stdout[-3000:]}\n--- stderr ---\n{run.result.stderr[-3000:]}"


@shared_task(bind=True, max_retries=2)
def revision_validate(self, report_id: int) -> str:
    report = ValidationReport.objects.select_related("revision__submission").get(pk=report_id)
    package = revision_package(report.revision)  # the very package acceptance stores as the Task
    checks_plan(report, package.annotated)
    ValidationReport.objects.filter(pk=report.pk).update(status=Status.RUNNING, started_at=timezone.now())
    try:
        status = _validate(report, package, report.revision.annotated_paths)
    except SandboxError as exc:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=5)
        logger.exception("validation of report %s failed on infrastructure", report_id)
        ValidationCheck.objects.filter(report=report, status__in=[Status.PENDING, Status.RUNNING]).update(
            status=Status.ERROR, detail=f"the sandbox failed: {exc}; nothing is wrong with the submission")
        status = Status.ERROR
    ValidationReport.objects.filter(pk=report.pk).update(status=status, finished_at=timezone.now())
    report.refresh_from_db()
    services.validation_finish(report=report)
    return status


def _validate(report, package: PaperPackage, annotated_paths: list[str]) -> str:
    ok = True
    files, annotated = dict(package.files), package.annotated
    paper = files.get(package.paper_path, b"").decode("utf-8", "replace")
    words = len(paper.split())
    if words >= MIN_PAPER_WORDS:
        _set(report, "paper", Status.PASSED, f"{words} words")
    else:
        ok = False
        _set(report, "paper", Status.FAILED, f"{package.paper_path or 'the paper'} has {words} words; "
                                             f"at least {MIN_PAPER_WORDS} are expected")
    problems = [str(p) for a in annotated.values() for p in a.problems]
    missing = [p for p in annotated_paths if p not in files]
    empty = [p for p, a in annotated.items() if not a.snippets]
    marker_errors = [str(p) for a in annotated.values() for p in a.errors] + \
        [f"{p}: file not found" for p in missing] + [f"{p}: no snippet markers" for p in empty]
    if marker_errors:
        _set(report, "markers", Status.FAILED, "\n".join(marker_errors + [w for w in problems if "warning" in w]))
        ValidationCheck.objects.filter(report=report, status=Status.PENDING).update(
            status=Status.SKIPPED, detail="not run: the markers must be valid first")
        return Status.FAILED
    _set(report, "markers", Status.PASSED, "\n".join(problems) or f"{sum(len(a.snippets) for a in annotated.values())} snippets")

    for check in sandbox_checks(files=files, annotated=annotated, requirements=package.requirements,
                                test_entry_point=package.test_entry_point):
        if check.backend:
            ValidationReport.objects.filter(pk=report.pk).update(sandbox_backend=check.backend)
        _set(report, check.key, check.status, check.detail, check.duration)
        if check.blocks:
            ValidationCheck.objects.filter(report=report, status=Status.PENDING).update(
                status=Status.SKIPPED, detail=check.blocks)
            return Status.FAILED
        ok = ok and check.status == Status.PASSED
    return Status.PASSED if ok else Status.FAILED


@dataclass(frozen=True)
class CheckResult:
    """One finished sandbox check of a package (keys as in `checks_plan`)."""

    key: str
    status: str
    detail: str = ""
    duration: float | None = None
    backend: str = ""  # the sandbox backend, given with the requirements check
    blocks: str = ""  # a failure that stops the remaining checks: why they are not run


def sandbox_checks(*, files: dict[str, bytes], annotated: dict, requirements: str,
                   test_entry_point: str) -> Iterator[CheckResult]:
    """FORMAT.md section 9 in the sandbox: the requirements install, the reference passes its tests
    SUBMISSION_REFERENCE_RUNS times, and each snippet masked, then replaced by a no-op, makes them fail.

    The one implementation for submissions and for whole problem sets (validate_pset)."""
    env_hash = environment_hash(requirements)
    started = time.monotonic()
    try:
        session = session_for(env_hash, requirements)
    except EnvironmentBuildError as exc:
        yield CheckResult("requirements", Status.FAILED, f"{exc}\n{exc.log[-6000:]}", time.monotonic() - started,
                          blocks="not run: the requirements must install first")
        return
    yield CheckResult("requirements", Status.PASSED, session.environment.build_log[-4000:],
                      time.monotonic() - started, backend=session.backend.name)

    limits = limits_default()
    limits = type(limits)(**{**limits.__dict__, "wall_seconds": settings.SUBMISSION_TEST_SECONDS})

    def test(package_files: dict[str, bytes]):
        return package_test(files=package_files, test_entry_point=test_entry_point,
                            environment_hash=env_hash, requirements=requirements, limits=limits)

    started = time.monotonic()
    for attempt in range(1, settings.SUBMISSION_REFERENCE_RUNS + 1):
        run = test(files)
        if run.verdict.status != "passed":
            yield CheckResult("reference", Status.FAILED, f"run {attempt} failed: {_output(run)}",
                              time.monotonic() - started, blocks="not run: the reference must pass first")
            return
    yield CheckResult("reference", Status.PASSED, f"python {test_entry_point} passed "
                      f"{settings.SUBMISSION_REFERENCE_RUNS} times", time.monotonic() - started)

    for path, parsed in annotated.items():
        for s in parsed.snippets:
            for kind, text in (("masked", mask(parsed, s)), ("noop", splice(parsed, s, noop(s)))):
                started = time.monotonic()
                run = test({**files, path: text.encode("utf-8")})
                if run.verdict.status == "passed":
                    yield CheckResult(
                        f"{kind}:{path}:{s.index}", Status.FAILED,
                        f'the tests still pass with "{s.name}" {"masked" if kind == "masked" else "replaced by pass"}:'
                        " they do not cover this snippet", time.monotonic() - started)
                else:
                    yield CheckResult(f"{kind}:{path}:{s.index}", Status.PASSED,
                                      f"failed as it should ({run.verdict.category})", time.monotonic() - started)


@shared_task
def drafts_prune() -> int:
    """Periodic (CELERY_BEAT_SCHEDULE): delete abandoned empty drafts."""
    removed = services.drafts_abandoned_remove(older_than=timedelta(days=settings.SUBMISSION_DRAFT_ABANDONED_DAYS))
    logger.info("deleted %d abandoned empty draft(s)", removed)
    return removed
