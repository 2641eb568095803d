"""The test entry point columns go (benchmarks 0008, submissions 0006-0007): what they held is carried over,
tested on a database at the migrations before them, filled as the old code would have filled it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from benchmarks.models import Task
from submissions import services
from submissions.models import SetValidationPaper, Submission

# serialized_rollback restores the rows of data migrations (the rcb-v1 protocol) that a transactional flush removes.
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

BEFORE = [("benchmarks", "0007_merge_round_three"), ("submissions", "0005_merge_round_three")]


@pytest.fixture
def old_apps():
    """The apps as of BEFORE; the test migrates forward itself, and the database ends at the latest state."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    yield executor.loader.project_state(BEFORE).apps
    migrate_to_latest()


def migrate_to_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _submission(apps, author_id: int, *, state: str, entry_points: list[str]):
    Submission_ = apps.get_model("submissions", "Submission")
    Revision_ = apps.get_model("submissions", "Revision")
    submission = Submission_.objects.create(author_id=author_id, title="A paper", state=state)
    for number, entry_point in enumerate(entry_points, 1):
        Revision_.objects.create(
            submission=submission,
            number=number,
            metadata={"id": "p", "title": "A paper"},
            files={},
            paper_path="paper2code_paper.md",
            test_entry_point=entry_point,
        )
    return submission.pk


def test_a_revision_validated_with_another_entry_point_is_sent_back_not_accepted(old_apps, author, maintainer):
    """Revisions made while the form still offered a choice: acceptance refused them rather than silently
    switching; with the column gone, the migration sends such a submission back for changes instead."""
    other = _submission(old_apps, author.pk, state="awaiting_review", entry_points=["run_other.py"])
    fixed = _submission(old_apps, author.pk, state="awaiting_review", entry_points=["paper2code_test.py"])
    replaced = _submission(
        old_apps, author.pk, state="awaiting_review", entry_points=["run_other.py", "paper2code_test.py"]
    )
    finished = _submission(old_apps, author.pk, state="rejected", entry_points=["run_other.py"])

    migrate_to_latest()

    states = dict(Submission.objects.values_list("pk", "state"))
    assert states == {
        other: "changes_requested",
        fixed: "awaiting_review",
        replaced: "awaiting_review",
        finished: "rejected",
    }
    change = Submission.objects.get(pk=other).history.get()
    assert (change.from_state, change.to_state, change.actor) == ("awaiting_review", "changes_requested", None)
    assert "validated with run_other.py" in change.reason and "paper2code_test.py" in change.reason
    with pytest.raises(services.TransitionError):
        services.submission_accept(submission=Submission.objects.get(pk=other), actor=maintainer, reason="ok")
    assert not Task.objects.exists()


def test_a_set_validation_paper_gets_its_paper_text_and_context_files(old_apps, maintainer):
    Paper = old_apps.get_model("benchmarks", "Paper")
    Task_ = old_apps.get_model("benchmarks", "Task")
    Version = old_apps.get_model("benchmarks", "BenchmarkVersion")
    VersionTask = old_apps.get_model("benchmarks", "VersionTask")
    SetValidation = old_apps.get_model("submissions", "SetValidation")
    Paper_ = old_apps.get_model("submissions", "SetValidationPaper")
    files = {"paper2code_paper.tex": "a" * 64, "paper2code_paper.md": "b" * 64, "model.py": "c" * 64}
    task = Task_.objects.create(
        paper=Paper.objects.create(slug="p", title="P"),
        revision=1,
        content_hash="d" * 64,
        files=files,
        paper_path="paper2code_paper.md",
        annotated_paths=["model.py"],
        context_paths=["paper2code_paper.tex"],
        environment_hash="e" * 64,
    )
    version = Version.objects.create(name="9.9.0")
    VersionTask.objects.create(version=version, task=task)
    of_version = SetValidation.objects.create(version=version, source="version 9.9.0", status="passed")
    of_folder = SetValidation.objects.create(source="/sets/one")
    rows = {
        "version": Paper_.objects.create(
            validation=of_version, position=0, paper="p", files=files, annotated_paths=["model.py"]
        ).pk,
        "folder": Paper_.objects.create(
            validation=of_folder, position=0, paper="p", files=files, annotated_paths=["model.py"]
        ).pk,
        "no text": Paper_.objects.create(
            validation=of_folder, position=1, paper="q", files={"model.py": "c" * 64}, annotated_paths=["model.py"]
        ).pk,
    }

    migrate_to_latest()

    stored = {name: SetValidationPaper.objects.get(pk=pk) for name, pk in rows.items()}
    assert (stored["version"].paper_path, stored["version"].context_paths) == (
        "paper2code_paper.md",
        ["paper2code_paper.tex"],
    )  # the task's own
    assert (stored["folder"].paper_path, stored["folder"].context_paths) == ("paper2code_paper.tex", [])  # first wins
    assert (stored["no text"].paper_path, stored["no text"].context_paths) == ("", [])
    assert stored["folder"].test_entry_point == "paper2code_test.py"
