"""Runs say whether they cover the held-out split; scores are stored per split too.

Runs made before this covered every item, so they are marked as covering the held-out split where their
version has one; their split scores are computed from their outcomes with the same function the live code uses.
"""

from django.db import migrations, models


def forwards(apps, schema_editor):
    from evaluation.scoring import run_score_inputs, score_rows

    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    Outcome = apps.get_model("evaluation", "Outcome")
    Generation = apps.get_model("evaluation", "Generation")
    RunScore = apps.get_model("evaluation", "RunScore")
    VersionTask = apps.get_model("benchmarks", "VersionTask")
    held_out_versions = set(VersionTask.objects.filter(split="held_out").values_list("version_id", flat=True))
    EvaluationRun.objects.filter(version_id__in=held_out_versions).update(covers_held_out=True)
    for run in EvaluationRun.objects.filter(scores__isnull=False).distinct():
        outcomes, usage = run_score_inputs(run=run, outcome_model=Outcome, generation_model=Generation,
                                           membership_model=VersionTask)
        RunScore.objects.bulk_create([RunScore(run=run, **fields)
                                      for fields in score_rows(outcomes=outcomes, usage=usage, samples=run.samples,
                                                               seed=run.pk)
                                      if fields["paper_id"] is None and fields["split"]])


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0001_initial"),
        ("evaluation", "0009_link_fields_http_only"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="covers_held_out",
            field=models.BooleanField(default=False, help_text="Evaluates the held-out split too (only runs of models maintainers trust)."),
        ),
        migrations.AddField(
            model_name="runscore",
            name="split",
            field=models.CharField(blank=True, choices=[("", "all"), ("public", "Public"), ("held_out", "held out")], default="", max_length=10),
        ),
        migrations.RemoveConstraint(
            model_name="runscore",
            name="runscore_unique_overall",
        ),
        migrations.AddConstraint(
            model_name="runscore",
            constraint=models.UniqueConstraint(condition=models.Q(("paper__isnull", True)), fields=("run", "split"), name="runscore_unique_split"),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
