"""A revision's mutants run on every worker (issue 36 item 1): with two real Celery workers on the sandbox queue, each
snippet's mutants are a task of their own, both workers run some, and the gathered scores are those the
single-process path (`sandbox_checks` in one process, as `validate_pset --mutants` runs them) gives for the same seed.
A worker killed in the middle of a snippet's mutants loses nothing: the other worker runs that snippet again and the
report ends once, with one result per snippet.

Both workers' part is made certain by a hold, not by time: while the test keeps a file in the package's environment
(the one folder of the test's that every sandboxed run sees), any run importing the paper's optimizer.py waits at its
import. Held, a worker stays on the snippet it claimed, so two snippets running at once are one on each worker."""

from __future__ import annotations

import os
import re
import signal
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from benchmarks.selectors import package_load
from benchmarks.services.blobs import environment_hash
from operations.models import OperationsEvent
from submissions import services
from submissions.models import StateChange, Submission, ValidationReport
from submissions.validation import sandbox_checks
from tests.conftest import polled
from tests.outages import WATCH
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db(transaction=True)
MUTANTS = 2
HOLD = "rcb-test-hold"
# Prepended to the paper's optimizer.py: waits while the test holds (sys.prefix: the environment, bound read-only at its
# own path in every bwrap sandbox), with the hold open, so the test sees who waits (/proc/PID/fd). Replayed in
# milliseconds, a snippet's mutants took 0.2 s and one worker could store all twelve before the other started; a 0.5 s
# import made them overlap, at the cost of every run of the validation and of the single-process path (159 s of
# this test where the hold takes 44 s, on one quiet 2-core machine).
HELD_IMPORT = f"""import os as _os
import sys as _sys
import time as _time

try:
    with open(_os.path.join(_sys.prefix, {HOLD!r})):
        while _os.path.exists(_os.path.join(_sys.prefix, {HOLD!r})):
            _time.sleep(0.02)
except OSError:
    pass
""".encode()
# A held mutant's time counts toward its limit (10 s at least, else 3 times the reference's slowest run): a long one,
# so that no mutant times out while held; the single-process path is given the same.
MUTATION_MIN_SECONDS = 120
WORKER = {
    "SANDBOX_BACKEND": "bwrap",
    "SUBMISSION_REFERENCE_RUNS": "2",
    "SUBMISSION_MUTANTS": str(MUTANTS),
    "MUTATION_MIN_SECONDS": str(MUTATION_MIN_SECONDS),
}


def submitted(name: str) -> ValidationReport:
    author = User.objects.create_user(name, email=f"{name}@example.org", password=f"pw-{name}-12345")
    files = demo_files()
    files["optimizer.py"] = HELD_IMPORT + files["optimizer.py"]
    submission = fill_draft(services.submission_create(author=author), author, files=services.draft_files_store(files))
    return services.submission_submit(submission=submission, actor=author).report


def ended(report: ValidationReport) -> bool:
    report = ValidationReport.objects.select_related("revision__submission").get(pk=report.pk)
    return report.status not in ("pending", "running") and report.revision.submission.state != "validating"


def verdicts(result: dict) -> list[tuple[str, str, str]]:
    return [(m["diff"], m["outcome"], m["by"]) for m in result["mutants"]]


def mutation_results(report: ValidationReport) -> dict[str, dict]:
    return {c.key: c.result for c in report.checks.filter(key__startswith="mutation:")}


def assert_ended_once(report: ValidationReport) -> None:
    report.refresh_from_db()
    checks = report.checks.all()
    assert report.status == "passed", list(checks.values_list("key", "status", "detail"))
    assert set(checks.values_list("status", flat=True)) == {"passed"}
    assert checks.filter(key__startswith="mutation:").count() == 12
    moves = StateChange.objects.filter(
        submission=report.revision.submission, from_state=Submission.State.VALIDATING
    ).values_list("to_state", flat=True)
    assert list(moves) == [Submission.State.AWAITING_REVIEW], "moved on once"


def keys(report: ValidationReport, *statuses: str) -> set[str]:
    checks = report.checks.filter(key__startswith="mutation:", status__in=statuses)
    return set(checks.values_list("key", flat=True))


@contextmanager
def held(report: ValidationReport, settings):
    """While open, any run importing the report's optimizer.py waits at its import. Yields the hold's path."""
    requirements = package_load(report.revision).requirements
    hold = Path(settings.SANDBOX_CACHE_DIR) / "venvs" / environment_hash(requirements) / HOLD
    assert hold.parent.is_dir(), "validation built the environment before its mutants"
    hold.touch()
    try:
        yield hold
    finally:
        hold.unlink()


def waiting(hold: Path) -> int:
    """How many processes wait at the hold (each has it open)."""
    count = 0
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        with suppress(OSError):
            count += os.readlink(fd) == str(hold)
    return count


def both_held(report: ValidationReport, hold: Path, worker) -> set[str]:
    """The two snippets running once a run of each worker waits at the hold (a worker runs one snippet at a time)."""

    def both() -> set[str] | None:
        if waiting(hold) == 2:
            return keys(report, "running")
        assert len(keys(report, "pending", "running")) >= 2, "the snippets ran out before the hold: too slow a test"
        return None

    running = polled(both, timeout=900, what="both workers to wait at the hold", worker=worker, interval=0.05)
    assert len(running) == 2, running
    return running


def storers(report: ValidationReport, *workers) -> dict[str, str]:
    """Check key -> the worker process that stored it, as the workers' logs say (the author's report does not)."""
    stored = re.compile(rf"mutants (mutation:\S+) of validation report {report.pk} stored on (\S+ pid \d+)")
    return {key: by for worker in workers for key, by in stored.findall(worker.output())}


# One validation serves both claims (spread with the single-process scores, and a worker killed mid-snippet losing
# nothing): each validation of the demo's 12 snippets costs half a minute of the suite.
def test_a_revisions_mutants_run_on_both_workers_and_a_worker_killed_mid_snippet_loses_nothing(
    celery_worker_factory, sandbox, settings, client
):
    # The watchdog looks every 2 s and queues again work idle for 6 s with no task queued or held.
    env = {**WATCH, **WORKER}
    survivor, doomed = (celery_worker_factory(queues="sandbox", **env) for _ in range(2))
    report = submitted("ada")
    # The hold begins once the validation's other checks are stored (it would hold their runs too), as it queues the
    # snippets' mutants; the first may run before the hold, too few left fails the test (never a wait of 900 s).
    polled(
        lambda: (
            keys(report, "pending")
            and not report.checks.exclude(key__startswith="mutation:").filter(status__in=["pending", "running"])
        ),
        timeout=900,
        what="the validation's checks before the mutants",
        worker=survivor,
        interval=0.05,
    )
    # Both workers run a snippet at once, held; let go, each stores it.
    with held(report, settings) as hold:
        first = both_held(report, hold, survivor)
    polled(lambda: first <= keys(report, "passed"), timeout=900, what="the two held snippets stored", worker=survivor)
    polled(
        lambda: len(set(storers(report, survivor, doomed).values())) >= 2,
        timeout=60,
        what="both workers' logs to say they stored a snippet",
        worker=survivor,
    )

    with held(report, settings) as hold:
        running = both_held(report, hold, survivor)
        # Live on the author's page: a snippet's score shows while other snippets' mutants are still out.
        assert keys(report, "passed") and running
        client.force_login(report.revision.submission.author)
        page = client.get(reverse("submission-report", args=[report.revision.submission_id])).content.decode()
        assert 'hx-trigger="every 2s"' in page and 'data-testid="mutation-score"' in page
        doomed.kill(signal.SIGKILL)  # its snippet's task is held, unacknowledged, by a worker that is gone
        assert keys(report, "running") == running, "a held snippet stays running"

    polled(lambda: ended(report), timeout=900, what="the validation to end", worker=survivor)
    assert_ended_once(report)
    spread = mutation_results(report)
    by = storers(report, survivor, doomed)
    assert set(by) == set(spread), sorted(by)
    assert len(set(by.values())) >= 2  # both workers' processes ran some
    assert not any("worker" in result for result in spread.values()), "which worker ran it is not the author's"
    # The snippet the killed worker was running was run again, to the end, by the survivor (its own held one too).
    survivor_name = f"test-{os.getpid()}-{id(survivor)}@"
    assert all(by[key].startswith(survivor_name) for key in running), (running, by)
    redispatched = OperationsEvent.objects.filter(kind="validation_redispatched", subject_id=report.pk)
    assert redispatched.exists(), "the watchdog queued the report's unfinished snippet again"

    # The single-process path on the very package the workers validated, with the same seed.
    settings.SUBMISSION_MUTANTS, settings.MUTATION_MIN_SECONDS = MUTANTS, MUTATION_MIN_SECONDS
    package = package_load(report.revision)
    inline = {
        check.key: check.result
        for check in sandbox_checks(
            files=dict(package.files),
            annotated=package.annotated,
            requirements=package.requirements,
            test_entry_point=package.test_entry_point,
            mutants=MUTANTS,
            judged_runs=1,  # only the mutation checks are compared: one judging of each reference is enough here
        )
        if check.key.startswith("mutation:")
    }
    assert sorted(inline) == sorted(spread)
    for key, result in spread.items():
        assert result["seed"] == inline[key]["seed"] == settings.MUTATION_SEED
        assert result["generated"] == len(result["mutants"]) > 0, key
        assert not result["timeouts"], (key, result["timeouts"])  # none ran into its limit, held or not
        assert (result["score"], result["killed"], result["equivalent"]) == (
            inline[key]["score"],
            inline[key]["killed"],
            inline[key]["equivalent"],
        ), key
        assert verdicts(result) == verdicts(inline[key]), key
