"""A model call that failed at an endpoint the model's owner runs (a run's api_base) counts as failed, category
"owner_endpoint", no longer an unscored error: that endpoint can fail exactly the items its model cannot solve
(evaluation.outcomes.model_call_failed). Such errors stored before are made what they would be now, and their runs'
stored aggregates recomputed with the functions the live code uses (a run's test-gaming count does not change)."""

from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Concat

# evaluation.outcomes.OWNER_ENDPOINT_SAID, as it was when this migration was written.
OWNER_ENDPOINT_SAID = "the model's own endpoint failed: counted as not passed"


def owner_endpoint_errors_failed(apps, schema_editor):
    from evaluation.scoring import (
        item_statistics,
        run_item_inputs,
        run_score_inputs,
        score_rows,
        size_buckets_by_split,
    )

    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    Outcome = apps.get_model("evaluation", "Outcome")
    RunScore = apps.get_model("evaluation", "RunScore")
    Generation = apps.get_model("evaluation", "Generation")
    VersionTask = apps.get_model("benchmarks", "VersionTask")
    errors = Outcome.objects.filter(status="error", category="model_call").exclude(run__api_base="")
    runs = set(errors.values_list("run_id", flat=True))
    errors.update(
        status="failed",
        category="owner_endpoint",
        detail=Concat(Value(f"{OWNER_ENDPOINT_SAID} ("), F("detail"), Value(")"), output_field=models.TextField()),
    )
    for run in EvaluationRun.objects.filter(pk__in=runs, scores__isnull=False).distinct():
        outcomes, usage = run_score_inputs(
            run=run, outcome_model=Outcome, generation_model=Generation, membership_model=VersionTask
        )
        buckets = size_buckets_by_split(outcomes)
        items = item_statistics(outcomes=run_item_inputs(run=run, outcome_model=Outcome, membership_model=VersionTask))
        for fields in score_rows(outcomes=outcomes, usage=usage, samples=run.samples, seed=run.pk):
            paper_id, split = fields.pop("paper_id"), fields.pop("split")
            if paper_id is None:
                fields.update(size_buckets=buckets.get(split, {}), **items.get(split, {}))
            RunScore.objects.filter(run=run, paper_id=paper_id, split=split).update(**fields)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0013_versiontask_replaced_by"),
        ("evaluation", "0036_agent_models_moved"),
    ]

    operations = [
        migrations.AlterField(
            model_name="outcome",
            name="category",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "passed"),
                    ("syntax", "Syntax error"),
                    ("name_import", "Name or import error"),
                    ("runtime", "Runtime error"),
                    ("wrong_result", "Wrong result"),
                    ("timeout", "Timeout"),
                    ("memory", "Memory"),
                    ("forbidden", "Uses hidden test or reference code"),
                    ("tampering", "Tampers with its test"),
                    ("infrastructure", "Infrastructure"),
                    ("model_call", "Model call failed"),
                    ("owner_endpoint", "The model's own endpoint failed"),
                    ("reported_error", "Error the upload reports"),
                ],
                max_length=20,
            ),
        ),
        migrations.RunPython(owner_endpoint_errors_failed, migrations.RunPython.noop),
    ]
