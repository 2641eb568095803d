"""The task package's fields are written once (an abstract model shared with tasks): a set validation paper gains
the paper text's path and the context files; 0007 removes the test entry point columns (a constant of the format).

What the columns held is carried over before they go:
- a revision validated with another entry point (made while the form still offered a choice) was refused at
  acceptance; the refusal goes with the column, so a submission awaiting review on such a revision is sent back
  for changes now, with the reason in its history, as the refusal asked the maintainer to do;
- a set validation paper's paper text is the folder's first of paper2code_paper.tex and .md (as a problem set is
  read), and a version's paper takes the context files of the version's task it was made from.
"""

from django.db import migrations, models

TEST_ENTRY_POINT = "paper2code_test.py"  # FORMAT.md 1, as benchmarks.paper2code.pset says it today
PAPER_TEXT_NAMES = ("paper2code_paper.tex", "paper2code_paper.md")  # first wins


def forwards(apps, schema_editor):
    Revision = apps.get_model("submissions", "Revision")
    StateChange = apps.get_model("submissions", "StateChange")
    SetValidationPaper = apps.get_model("submissions", "SetValidationPaper")
    Task = apps.get_model("benchmarks", "Task")

    for revision in Revision.objects.exclude(test_entry_point=TEST_ENTRY_POINT).select_related("submission"):
        submission = revision.submission
        latest = submission.revisions.order_by("-number").values_list("pk", flat=True).first()
        if submission.state != "awaiting_review" or latest != revision.pk:
            continue  # not acceptable as it stands: a new revision is validated with paper2code_test.py
        StateChange.objects.create(
            submission=submission, from_state="awaiting_review", to_state="changes_requested", actor=None,
            reason=f"r{revision.number} was validated with {revision.test_entry_point}, but a task always runs "
                   f"{TEST_ENTRY_POINT}: submit a new revision, which is validated with it")
        type(submission).objects.filter(pk=submission.pk).update(state="changes_requested")

    for paper in SetValidationPaper.objects.select_related("validation"):
        paper.paper_path = next((name for name in PAPER_TEXT_NAMES if name in paper.files), "")
        task = None
        if paper.validation.version_id is not None:
            task = next((t for t in Task.objects.filter(memberships__version_id=paper.validation.version_id,
                                                        paper__slug=paper.paper) if t.files == paper.files), None)
        if task is not None:
            paper.paper_path, paper.context_paths = task.paper_path, task.context_paths
        paper.save(update_fields=["paper_path", "context_paths"])


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0007_merge_round_three'),
        ('submissions', '0005_merge_round_three'),
    ]

    operations = [
        migrations.AddField(
            model_name='setvalidationpaper',
            name='context_paths',
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name='setvalidationpaper',
            name='paper_path',
            field=models.CharField(default='', max_length=300),
            preserve_default=False,
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
