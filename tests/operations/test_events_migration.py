"""The event log's move to operations carries every event over with its time, its foreign key turned into a subject
(a release's re-dispatch gets its release from its text), and the re-dispatch state onto the rows: a run's and a
validation report's count of re-dispatches, a report's last one, a release's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [
    ("evaluation", "0022_run_leaderboard_pin"),
    ("submissions", "0005_merge_round_three"),
    ("benchmarks", "0007_merge_round_three"),
    ("operations", "0001_event_log_and_redispatch"),
]
AFTER = [
    ("evaluation", "0023_events_to_operations"),
    ("submissions", "0006_validation_report_redispatch"),
    ("benchmarks", "0008_release_downloads_redispatch"),
]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def latest_after():
    """The database ends at the latest state whatever happens (migrations after AFTER are the rest's)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_events_and_redispatch_state_are_carried_over(latest_after):
    apps = _migrate(BEFORE)
    try:
        User = apps.get_model("auth", "User")
        Version = apps.get_model("benchmarks", "BenchmarkVersion")
        Model = apps.get_model("evaluation", "ModelEntry")
        Run = apps.get_model("evaluation", "EvaluationRun")
        Event = apps.get_model("evaluation", "OperationsEvent")
        Submission = apps.get_model("submissions", "Submission")
        Revision = apps.get_model("submissions", "Revision")
        Report = apps.get_model("submissions", "ValidationReport")
        SetValidation = apps.get_model("submissions", "SetValidation")
        author = User.objects.create(username="ada")
        version = Version.objects.create(name="9.9.9", status="published")
        model = Model.objects.create(name="m", display_name="M", kind="reference")
        run = Run.objects.create(model=model, version=version)
        report = Report.objects.create(
            revision=Revision.objects.create(
                submission=Submission.objects.create(author=author), number=1, metadata={}, files={}, paper_path="p.md"
            )
        )
        checked = SetValidation.objects.create(version=version, source="9.9.9")
        long_ago = timezone.now() - timedelta(days=3)
        rows = [
            dict(kind="items_redispatched", run=run, items=4),
            dict(kind="items_redispatched", run=run, items=2),
            dict(kind="validation_redispatched", report=report),
            dict(kind="validation_redispatched", set_validation=checked, items=1),
            dict(
                kind="downloads_redispatched",
                detail="the downloads of release 9.9.9 were being prepared with "
                "no queued or running task after 301 s; queued again",
            ),
            dict(kind="database_unavailable", worker="w1", since=long_ago),
        ]
        for n, row in enumerate(rows):
            event = Event.objects.create(**{"detail": f"event {n}", **row})
            Event.objects.filter(pk=event.pk).update(created_at=long_ago + timedelta(minutes=n))
    finally:
        apps = _migrate(AFTER)

    Event = apps.get_model("operations", "OperationsEvent")
    events = list(
        Event.objects.order_by("created_at").values_list(
            "kind", "subject_kind", "subject_id", "items", "worker", "created_at"
        )
    )
    assert events == [
        ("items_redispatched", "evaluation.evaluationrun", run.pk, 4, "", long_ago),
        ("items_redispatched", "evaluation.evaluationrun", run.pk, 2, "", long_ago + timedelta(minutes=1)),
        ("validation_redispatched", "submissions.validationreport", report.pk, 0, "", long_ago + timedelta(minutes=2)),
        ("validation_redispatched", "submissions.setvalidation", checked.pk, 1, "", long_ago + timedelta(minutes=3)),
        ("downloads_redispatched", "benchmarks.benchmarkversion", version.pk, 0, "", long_ago + timedelta(minutes=4)),
        ("database_unavailable", "", None, 0, "w1", long_ago + timedelta(minutes=5)),
    ]
    assert Event.objects.get(kind="database_unavailable").since == long_ago
    assert apps.get_model("evaluation", "EvaluationRun").objects.get(pk=run.pk).redispatches == 2
    report_after = apps.get_model("submissions", "ValidationReport").objects.get(pk=report.pk)
    assert (report_after.redispatches, report_after.redispatched_at) == (1, long_ago + timedelta(minutes=2))
    version_after = apps.get_model("benchmarks", "BenchmarkVersion").objects.get(pk=version.pk)
    assert (version_after.redispatches, version_after.redispatched_at) == (1, long_ago + timedelta(minutes=4))
