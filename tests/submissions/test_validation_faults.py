"""Faults while submissions validate, with real processes: the broker (a Redis of the test's own, keeping nothing on
disk) killed while one validation runs and another waits in its queue, and the database (a PostgreSQL cluster of
the test's own) stopped in the middle of a validation. Every validation finishes by itself, every check has one
result, each submission moves on once, and the operations page says what happened."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

from operations.events import events_of
from operations.models import OperationsEvent
from submissions import services
from submissions.models import StateChange, Submission, ValidationReport
from tests.conftest import polled
from tests.outages import WATCH, default_database
from tests.submissions.conftest import fill_draft

# Their tests kill the broker: a Redis server of their own (tests/outages.py).
pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True), pytest.mark.own_broker]
WORKER = {**WATCH, "SUBMISSION_REFERENCE_RUNS": "2", "SUBMISSION_MUTANTS": "0"}  # mutants: their own tests


def submitted(name: str) -> tuple[Submission, ValidationReport]:
    author = User.objects.create_user(name, email=f"{name}@example.org", password=f"pw-{name}-12345")
    submission = fill_draft(services.submission_create(author=author), author)
    revision = services.submission_submit(submission=submission, actor=author)
    return submission, revision.report


def finished(report: ValidationReport) -> bool:
    """The report ended and its submission moved on: the worker ends the report, then moves the submission in a
    second step, and a check between the two (CI, under load) saw a finished report on a submission not moved yet."""
    report = ValidationReport.objects.select_related("revision__submission").get(pk=report.pk)
    return report.status not in ("pending", "running") and (
        report.revision.submission.state != Submission.State.VALIDATING
    )


def assert_validated_once(submission: Submission, report: ValidationReport) -> None:
    report.refresh_from_db()
    checks = report.checks.all()
    assert report.status == "passed", list(checks.values_list("key", "status", "detail"))
    assert checks.count() == checks.values("key").distinct().count() == 4 + 4 * 12
    assert set(checks.values_list("status", flat=True)) == {"passed"}
    moves = StateChange.objects.filter(submission=submission, from_state=Submission.State.VALIDATING)
    assert list(moves.values_list("to_state", flat=True)) == [Submission.State.AWAITING_REVIEW], "moved on once"


def operations_page(client) -> str:
    maintainer = User.objects.create_user("maya", password="pw-maya-12345")
    maintainer.groups.add(Group.objects.get_or_create(name="maintainers")[0])
    client.force_login(maintainer)
    response = client.get("/operations/")
    assert response.status_code == 200
    return response.content.decode()


def test_broker_killed_while_a_validation_waits_in_its_queue(own_redis, celery_worker_factory, media_root, client):
    worker = celery_worker_factory(queues="sandbox", **WORKER)  # one process: the second validation waits
    first, first_report = submitted("ada")
    second, second_report = submitted("bob")
    polled(
        lambda: first_report.checks.filter(status="passed").exists(),
        timeout=600,
        what="the first validation to be under way",
        worker=worker,
    )
    assert not finished(second_report)

    own_redis.kill()  # the waiting validation's message is gone with it
    time.sleep(3)
    own_redis.start()

    for report in (first_report, second_report):
        polled(lambda report=report: finished(report), timeout=600, what=f"report {report.pk} to finish", worker=worker)
    assert_validated_once(first, first_report)
    assert_validated_once(second, second_report)
    event = OperationsEvent.objects.get(kind=OperationsEvent.Kind.VALIDATION_REDISPATCHED)
    assert (event.subject_kind, event.subject_id) == ("submissions.validationreport", second_report.pk)
    assert not events_of(subject=first_report, kinds=[OperationsEvent.Kind.VALIDATION_REDISPATCHED]).exists(), (
        "a running validation is left alone"
    )
    page = operations_page(client)
    assert f'data-event="{event.pk}"' in page and "Validation re-dispatched" in page


def test_database_stopped_in_the_middle_of_a_validation(own_postgres, celery_worker_factory, media_root, client):
    with default_database(own_postgres.url()):
        worker = celery_worker_factory(queues="sandbox", **WORKER)
        submission, report = submitted("ada")
        polled(
            lambda: report.checks.filter(status="passed").count() >= 4,
            timeout=600,
            what="the validation to be under way",
            worker=worker,
        )

        connection.close()
        own_postgres.stop("immediate")
        time.sleep(5)
        own_postgres.start()

        polled(lambda: finished(report), timeout=600, what="the validation to finish", worker=worker)
        assert_validated_once(submission, report)
        outage = OperationsEvent.objects.filter(kind=OperationsEvent.Kind.DATABASE_UNAVAILABLE).first()
        assert outage is not None and "revision_validate" in outage.detail, worker.output()[-4000:]
        page = operations_page(client)
        assert f'data-event="{outage.pk}"' in page
        worker.kill()


def test_a_validation_lost_past_the_limit_makes_the_submission_invalid_for_its_author_to_submit_again(
    own_redis, celery_worker_factory, media_root, client
):
    worker = celery_worker_factory(queues="sandbox", VALIDATION_REDISPATCH_MAX="0", **WORKER)
    first, first_report = submitted("ada")
    second, second_report = submitted("bob")
    polled(
        lambda: first_report.checks.filter(status="passed").exists(),
        timeout=600,
        what="the first validation to be under way",
        worker=worker,
    )
    own_redis.kill()  # the waiting validation's message is gone with it
    time.sleep(3)
    own_redis.start()

    polled(lambda: finished(second_report), timeout=600, what="the lost validation to end", worker=worker)
    second_report.refresh_from_db()
    second.refresh_from_db()
    assert second_report.status == "error" and second.state == Submission.State.INVALID
    lost = second_report.checks.get(status="error")  # its checks were never planned: the task never ran
    assert "the workers lost this validation 1 time(s)" in lost.detail
    assert lost.label in StateChange.objects.get(submission=second, to_state=Submission.State.INVALID).reason
    assert (
        events_of(subject=second_report).filter(kind=OperationsEvent.Kind.VALIDATION_ABANDONED).count()
        == OperationsEvent.objects.filter(kind=OperationsEvent.Kind.VALIDATION_ABANDONED).count()
        == 1
    )
    services.submission_edit(submission=second, actor=second.author)  # back to draft, to submit again
    assert Submission.objects.get(pk=second.pk).state == Submission.State.DRAFT
    polled(lambda: finished(first_report), timeout=600, what="the first validation", worker=worker)
    assert_validated_once(first, first_report)
