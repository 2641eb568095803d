"""Runs' overall and split scores store their snippet-size buckets, so the leaderboard's size tab reads aggregates
like the other tabs; scores stored before this get them from their outcomes, with the function the live code uses."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    from evaluation.scoring import run_score_inputs, size_buckets_by_split

    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    RunScore = apps.get_model("evaluation", "RunScore")
    for run in EvaluationRun.objects.filter(scores__isnull=False).distinct():
        outcomes, _ = run_score_inputs(run=run, outcome_model=apps.get_model("evaluation", "Outcome"),
                                           generation_model=apps.get_model("evaluation", "Generation"),
                                           membership_model=apps.get_model("benchmarks", "VersionTask"))
        for split, buckets in size_buckets_by_split(outcomes).items():
            RunScore.objects.filter(run=run, paper__isnull=True, split=split).update(size_buckets=buckets)


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0001_initial"),
        ("evaluation", "0012_operations_events"),
    ]

    operations = [
        migrations.AddField(
            model_name="runscore",
            name="size_buckets",
            field=models.JSONField(blank=True, default=dict, help_text="Snippet-size bucket -> {items, passed} of the scored outcomes; on overall and split rows."),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
