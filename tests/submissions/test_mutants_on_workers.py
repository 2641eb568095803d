"""A revision's mutants run on every worker (issue 36 item 1): with two real Celery workers on the sandbox queue, each
snippet's mutants are a task of their own, both workers run some, and the gathered scores are those the
single-process path (`sandbox_checks` in one process, as `validate_pset --mutants` runs them) gives for the same seed.
A worker killed in the middle of a snippet's mutants loses nothing: the other worker runs that snippet again and the
report ends once, with one result per snippet."""

from __future__ import annotations

import os
import re
import signal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from benchmarks.selectors import package_load
from operations.models import OperationsEvent
from submissions import services
from submissions.models import StateChange, Submission, ValidationReport
from submissions.validation import sandbox_checks
from tests.conftest import polled
from tests.outages import WATCH
from tests.submissions.conftest import demo_files, fill_draft

pytestmark = pytest.mark.django_db(transaction=True)
MUTANTS = 2
# Each mutant's replay imports its own optimizer.py: a slow import (as a paper loading weights has) keeps a snippet's
# mutants on a worker for a second or more. Replayed in milliseconds, two workers' snippets barely overlapped, and the
# test's wait for both to run one at once timed out on a machine where one worker started later (CI, 900 s).
SLOW_IMPORT = b"import time\n\ntime.sleep(0.5)\n"
WORKER = {"SANDBOX_BACKEND": "bwrap", "SUBMISSION_REFERENCE_RUNS": "2", "SUBMISSION_MUTANTS": str(MUTANTS)}


def submitted(name: str) -> ValidationReport:
    author = User.objects.create_user(name, email=f"{name}@example.org", password=f"pw-{name}-12345")
    files = demo_files()
    files["optimizer.py"] = SLOW_IMPORT + files["optimizer.py"]
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


def storers(report: ValidationReport, *workers) -> dict[str, str]:
    """Check key -> the worker process that stored it, as the workers' logs say (the author's report does not)."""
    stored = re.compile(rf"mutants (mutation:\S+) of validation report {report.pk} stored on (\S+ pid \d+)")
    return {key: by for worker in workers for key, by in stored.findall(worker.output())}


# One validation serves both claims (spread with the single-process scores, and a worker killed mid-snippet losing
# nothing): each validation of the demo's 12 snippets costs one to two minutes of the suite.
def test_a_revisions_mutants_run_on_both_workers_and_a_worker_killed_mid_snippet_loses_nothing(
    celery_worker_factory, sandbox, settings, client
):
    # The watchdog looks every 2 s and queues again work idle for 6 s with no task queued or held.
    env = {**WATCH, **WORKER}
    survivor, doomed = (celery_worker_factory(queues="sandbox", **env) for _ in range(2))
    report = submitted("ada")
    mutation = report.checks.filter(key__startswith="mutation:")
    # Live on the author's page: a snippet's score shows while other snippets' mutants are still out.
    polled(
        lambda: (
            mutation.filter(status="passed").exists() and mutation.filter(status__in=["pending", "running"]).exists()
        ),
        timeout=900,
        what="some snippets' mutants to be scored while others run",
        worker=survivor,
    )
    client.force_login(report.revision.submission.author)
    page = client.get(reverse("submission-report", args=[report.revision.submission_id])).content.decode()
    assert 'hx-trigger="every 2s"' in page and 'data-testid="mutation-score"' in page

    # Both workers' processes have stored some snippets' mutants and each is running another.
    polled(
        lambda: (
            len(set(storers(report, survivor, doomed).values())) >= 2 and mutation.filter(status="running").count() == 2
        ),
        timeout=900,
        what="both workers to have stored a snippet's mutants and to run another",
        worker=survivor,
    )
    running = set(mutation.filter(status="running").values_list("key", flat=True))
    doomed.kill(signal.SIGKILL)  # its snippet's task is held, unacknowledged, by a worker that is gone
    # A snippet the killed worker stored between that read and the kill is done, its log line lost with the process.
    finished_at_kill = running - set(mutation.filter(status="running").values_list("key", flat=True))
    running -= finished_at_kill

    polled(lambda: ended(report), timeout=900, what="the validation to end", worker=survivor)
    assert_ended_once(report)
    spread = mutation_results(report)
    by = storers(report, survivor, doomed)
    assert set(by) <= set(spread) and set(spread) - set(by) <= finished_at_kill, (sorted(by), finished_at_kill)
    assert len(set(by.values())) >= 2  # both workers' processes ran some
    assert not any("worker" in result for result in spread.values()), "which worker ran it is not the author's"
    # The snippet the killed worker was running was run again, to the end, by the survivor.
    survivor_name = f"test-{os.getpid()}-{id(survivor)}@"
    assert all(by[key].startswith(survivor_name) for key in running), (running, by)
    redispatched = OperationsEvent.objects.filter(kind="validation_redispatched", subject_id=report.pk)
    assert redispatched.exists(), "the watchdog queued the report's unfinished snippet again"

    # The single-process path on the very package the workers validated, with the same seed.
    settings.SUBMISSION_MUTANTS = MUTANTS
    package = package_load(report.revision)
    inline = {
        check.key: check.result
        for check in sandbox_checks(
            files=dict(package.files),
            annotated=package.annotated,
            requirements=package.requirements,
            test_entry_point=package.test_entry_point,
            mutants=MUTANTS,
        )
        if check.key.startswith("mutation:")
    }
    assert sorted(inline) == sorted(spread)
    for key, result in spread.items():
        assert result["seed"] == inline[key]["seed"] == settings.MUTATION_SEED
        assert result["generated"] == len(result["mutants"]) > 0, key
        assert (result["score"], result["killed"], result["equivalent"]) == (
            inline[key]["score"],
            inline[key]["killed"],
            inline[key]["equivalent"],
        ), key
        assert verdicts(result) == verdicts(inline[key]), key
