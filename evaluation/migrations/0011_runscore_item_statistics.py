"""Split scores keep item-level aggregates (each item's pass share, answers per outcome category), so ranks with
ties, item difficulty and failure categories read stored rows; existing runs get them from their outcomes with
the function the live code uses."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    from evaluation.scoring import item_statistics, run_item_inputs

    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    Outcome = apps.get_model("evaluation", "Outcome")
    RunScore = apps.get_model("evaluation", "RunScore")
    VersionTask = apps.get_model("benchmarks", "VersionTask")
    for run in EvaluationRun.objects.filter(scores__isnull=False).distinct():
        items = item_statistics(outcomes=run_item_inputs(run=run, outcome_model=Outcome,
                                                         membership_model=VersionTask))
        for score in RunScore.objects.filter(run=run, paper__isnull=True):
            stats = items.get(score.split, {})
            score.item_passes, score.categories = stats.get("item_passes", {}), stats.get("categories", {})
            score.save(update_fields=["item_passes", "categories"])


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0004_items_download_public_only"),
        ("evaluation", "0010_held_out_split"),
    ]

    operations = [
        migrations.AddField(
            model_name="runscore",
            name="item_passes",
            field=models.JSONField(blank=True, default=dict, help_text="Item id -> share of its scored samples that passed (split rows)."),
        ),
        migrations.AddField(
            model_name="runscore",
            name="categories",
            field=models.JSONField(blank=True, default=dict, help_text='Scored answers per outcome category, e.g. {"passed": 3, "syntax": 1} (split rows).'),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
