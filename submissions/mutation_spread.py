"""A revision's mutation testing spread over the workers (issue 36 item 1): once its other checks are stored, one
task per snippet on the `sandbox` queue (`revision_mutants`), so every worker takes some; each stores its snippet's
check as it ends (the page shows it live), and the one that finds no mutation check left ends the report.

Safe against lost and repeated tasks: a snippet's check is written only while it is still pending or running (a
second copy of its task finds it done and skips it), and the report is ended under its row lock by whichever task
sees the last check stored. While one copy runs a snippet's mutants it holds the check's claim (on PostgreSQL a
session advisory lock, which the database drops with a lost worker's connection), so a second copy (a redelivery, a
report queued again) skips that snippet instead of running its mutants twice. A task lost with its worker is
delivered again (acks_late), or the watchdog queues the report again and `revision_validate` queues only its
unfinished snippets (`mutation_resumable`); either finds the lost copy's claim gone and runs the snippet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from benchmarks.selectors import package_load
from benchmarks.services.blobs import environment_hash
from common.text import storable
from evaluation.environments import build_failures
from evaluation.executor import package_preloads_announce, session_for
from operations.enqueue import enqueue
from submissions import services
from submissions.models import ValidationCheck, ValidationReport
from submissions.validation import (
    CheckResult,
    mutation_check,
    mutation_limits,
    mutation_score_min,
    package_hidden,
    package_tester,
    validation_limits,
)

Status = ValidationReport.Status
ACTIVE = [Status.PENDING, Status.RUNNING]
MUTATION = "mutation:"
REVISION_MUTANTS = "submissions.tasks.revision_mutants"  # queued by name: the tasks module imports this one
MUTANTS_CLAIM = 0x72636236  # "rcb6": the advisory locks' first key; the check's id is the second


def mutation_pending(*, report: ValidationReport) -> list[str]:
    """The keys of the report's mutation checks with no result yet, in the report's order."""
    return list(
        report.checks.filter(key__startswith=MUTATION, status__in=ACTIVE)
        .order_by("position")
        .values_list("key", flat=True)
    )


def mutation_resumable(*, report: ValidationReport) -> bool:
    """The report reached its mutation checks: every other check has ended and some mutation check has not."""
    checks = report.checks.filter(status__in=ACTIVE)
    return not checks.exclude(key__startswith=MUTATION).exists() and checks.filter(key__startswith=MUTATION).exists()


def mutation_dispatch(*, report: ValidationReport) -> int:
    """Queue one task per unfinished snippet of the report; how many were queued (the broker down: the watchdog
    queues the report again once it answers, and `revision_validate` resumes here)."""
    keys = mutation_pending(report=report)
    for queued, key in enumerate(keys):

        def refused(exc: Exception, queued: int = queued) -> str:
            return (
                f"the mutants of validation report {report.pk} could not be queued ({exc}); {queued} of {len(keys)} "
                "snippets queued, the watchdog queues the others once the broker answers"
            )

        if not enqueue(REVISION_MUTANTS, report.pk, key, subject=report, refused=refused):
            return queued
    return len(keys)


@contextlib.contextmanager
def mutation_claim(*, report: ValidationReport, key: str) -> Iterator[bool]:
    """Whether this process may run the snippet's mutants, held until the block ends: the check has no result yet and
    no other live process holds its claim (then it is marked running). On SQLite, one machine's development database
    with no advisory locks, a check without a result is claimed whoever else runs it."""
    check = ValidationCheck.objects.filter(report=report, key=key, status__in=ACTIVE).values_list("pk", flat=True)
    pk = check.first()
    if pk is None:  # done
        yield False
        return
    lock = [MUTANTS_CLAIM, pk % 2**31]
    locked = connection.vendor == "postgresql"
    if locked:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", lock)
            locked = bool(cursor.fetchone()[0])
        if not locked:  # another copy runs it now
            yield False
            return
    try:
        # Looked at again once claimed: the copy that held the claim may have stored its result meanwhile.
        yield bool(check.update(status=Status.RUNNING))
    finally:
        if locked:
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:  # a lost connection dropped it
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", lock)


def snippet_mutation_run(*, report: ValidationReport, key: str) -> CheckResult | None:
    """Measure one snippet's mutation score (`mutation_check`, as a validation's own process does) and store its
    check; None when its check has a result already or another copy of the task runs it now."""
    with mutation_claim(report=report, key=key) as claimed:
        return _snippet_mutation_measure(report=report, key=key) if claimed else None


def _snippet_mutation_measure(*, report: ValidationReport, key: str) -> CheckResult:
    revision = report.revision
    package = package_load(revision)  # with the tests validation made from an example script, when it did
    files, annotated = dict(package.files), package.annotated
    _, path, index = key.split(":", 2)
    limits = validation_limits()
    reference = report.checks.filter(key="reference").values_list("result", flat=True).first() or {}
    session = session_for(environment_hash(package.requirements), package.requirements, failures=build_failures)
    # A worker whose fork server never ran this package's tests starts it once, with their imports, not twice.
    package_preloads_announce(
        session=session,
        files=files,
        skipped=[(p.path, s.start_line, s.end_line) for p in annotated.values() for s in p.snippets],
        test_entry_point=package.test_entry_point,
    )
    check = mutation_check(
        session=session,
        files=files,
        hidden=package_hidden(files=files, annotated=annotated, test_entry_point=package.test_entry_point),
        recording=revision.recording,
        parsed=annotated[path],
        position=int(index),
        mutants=settings.SUBMISSION_MUTANTS,
        limits=mutation_limits(limits, slowest=max(reference.get("durations", []), default=0.0)),
        test=package_tester(
            test_entry_point=package.test_entry_point, requirements=package.requirements, limits=limits
        ),
        score_min=mutation_score_min(),
    )
    ValidationCheck.objects.filter(report=report, key=key, status__in=ACTIVE).update(
        **storable(
            dict(
                status=check.status,
                detail=check.detail[-8000:],
                duration=check.duration,
                result=check.result,
                warning=check.warning,
            )
        )
    )
    return check


def snippet_mutation_error(*, report: ValidationReport, key: str, detail: str) -> None:
    """The sandbox failed on this snippet's mutants past its retries: an error of the platform, not of the paper."""
    ValidationCheck.objects.filter(report=report, key=key, status__in=ACTIVE).update(
        status=Status.ERROR, detail=storable(detail)
    )


@transaction.atomic
def mutation_gather(*, report: ValidationReport) -> str | None:
    """End the report once none of its mutation checks is left: failed when a check failed, an error when one
    errored, else passed, and move the submission on; its status then, None while some snippet is still out (or
    another task ended it)."""
    report = ValidationReport.objects.select_for_update().select_related("revision__submission").get(pk=report.pk)
    if report.status != Status.RUNNING or mutation_pending(report=report):
        return None
    statuses = set(report.checks.values_list("status", flat=True))
    report.status = (
        Status.ERROR if Status.ERROR in statuses else Status.FAILED if Status.FAILED in statuses else Status.PASSED
    )
    report.finished_at = timezone.now()
    report.save(update_fields=["status", "finished_at"])
    services.validation_finish(report=report)
    return report.status
