"""One copy of a snippet's `revision_mutants` task runs its mutants (issue 33, an attacker's leftover): a second copy
(a redelivery, the report queued again) used to run them too while the first still ran, the first result winning;
now the running copy holds the check's claim (a PostgreSQL advisory lock, dropped with a lost worker's connection),
so a second copy skips the snippet, and a lost copy's snippet is taken again. Which worker ran it goes to the
operations log, not into the author's report (it named a host and a process id)."""

from __future__ import annotations

import importlib

import psycopg
import pytest
from django.db import connection

from submissions import mutation_spread, services
from submissions.models import Revision, ValidationCheck, ValidationReport
from submissions.validation import CheckResult
from tests.conftest import database_url_for_workers, polled
from tests.submissions.conftest import demo_files

pytestmark = pytest.mark.django_db
KEY = "mutation:optimizer.py:0"
SCORED = {"generated": 2, "killed": 2, "survived": 0, "score": 1.0, "mutants": []}


@pytest.fixture
def running(draft, monkeypatch):
    """A report at its mutation checks, with the mutants' run stubbed to count its runs (the sandbox is not what
    this is about)."""
    revision = Revision.objects.create(
        submission=draft,
        number=1,
        metadata=draft.draft["metadata"],
        files=services.draft_files_store(demo_files()),
        paper_path="paper2code_paper.md",
        annotated_paths=["optimizer.py"],
    )
    report = ValidationReport.objects.create(revision=revision, status=ValidationReport.Status.RUNNING)
    ValidationCheck.objects.create(report=report, position=0, key=KEY, label="mutants")
    runs: list[str] = []

    def measured(**kwargs) -> CheckResult:
        runs.append(KEY)
        return CheckResult(KEY, ValidationReport.Status.PASSED, "2 of 2 killed", 1.0, result=dict(SCORED))

    monkeypatch.setattr(mutation_spread, "session_for", lambda *args, **kwargs: None)
    monkeypatch.setattr(mutation_spread, "mutation_check", measured)
    return report, runs


def claim_held(check: ValidationCheck) -> psycopg.Connection:
    """Another process's connection holding the check's claim, as a copy running its mutants does."""
    other = psycopg.connect(database_url_for_workers(), autocommit=True)
    held = other.execute("SELECT pg_try_advisory_lock(%s, %s)", [mutation_spread.MUTANTS_CLAIM, check.pk]).fetchone()
    assert held == (True,)
    return other


def claims_held(check: ValidationCheck) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s",
            [mutation_spread.MUTANTS_CLAIM, check.pk],
        )
        return cursor.fetchone()[0]


@pytest.mark.postgres  # the claim is PostgreSQL's advisory lock
def test_a_second_copy_skips_a_snippet_another_copy_is_running(running):
    report, runs = running
    check = report.checks.get(key=KEY)
    first = claim_held(check)
    try:
        assert mutation_spread.snippet_mutation_run(report=report, key=KEY) is None
        assert runs == [] and report.checks.get(key=KEY).status == "pending"
    finally:
        first.close()  # its worker is lost: the database drops its claim with its connection (once its backend ends)
    polled(lambda: not claims_held(check), timeout=10, what="the lost connection's claim to be dropped")
    ValidationCheck.objects.filter(pk=check.pk).update(status="running")  # as the lost copy left it
    assert mutation_spread.snippet_mutation_run(report=report, key=KEY) is not None
    assert runs == [KEY], "the lost copy's snippet is run again"
    assert mutation_spread.snippet_mutation_run(report=report, key=KEY) is None, "done: skipped"
    assert runs == [KEY]


def test_the_stored_score_names_no_worker(running):
    report, _ = running
    mutation_spread.snippet_mutation_run(report=report, key=KEY)
    stored = report.checks.get(key=KEY)
    assert (stored.status, stored.result) == ("passed", SCORED)


def test_scores_stored_before_lose_their_worker(running):
    from django.apps import apps

    report, _ = running
    ValidationCheck.objects.filter(report=report).update(result={**SCORED, "worker": "w1@host pid 4242"})
    migration = importlib.import_module("submissions.migrations.0013_mutation_results_without_worker")
    migration._forget(apps, None)
    assert report.checks.get(key=KEY).result == SCORED
