"""A run's token totals are None when an answer's count is unknown (uploads, published results, a provider that gave
none), as its cost is: they were stored as 0, which pages showed as a count. Calibration answers call no model, so
their counts are a known 0. Stored totals are recomputed with the function the live code uses."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    from evaluation.scoring import run_score_inputs, usage_of, usage_totals

    EvaluationRun = apps.get_model("evaluation", "EvaluationRun")
    Generation = apps.get_model("evaluation", "Generation")
    RunScore = apps.get_model("evaluation", "RunScore")
    Generation.objects.filter(run__model__kind__in=("reference", "placeholder"), prompt_tokens__isnull=True).update(
        prompt_tokens=0
    )
    Generation.objects.filter(
        run__model__kind__in=("reference", "placeholder"), completion_tokens__isnull=True
    ).update(completion_tokens=0)
    for run in EvaluationRun.objects.filter(scores__isnull=False).distinct():
        if run.provenance == "reported":  # published results say nothing of tokens
            RunScore.objects.filter(run=run).update(prompt_tokens=None, completion_tokens=None)
            continue
        _, usage = run_score_inputs(
            run=run,
            outcome_model=apps.get_model("evaluation", "Outcome"),
            generation_model=Generation,
            membership_model=apps.get_model("benchmarks", "VersionTask"),
        )
        for score in RunScore.objects.filter(run=run):
            prompt, completion, _ = usage_totals(usage_of(usage, split=score.split, paper_id=score.paper_id))
            if (prompt, completion) != (score.prompt_tokens, score.completion_tokens):
                RunScore.objects.filter(pk=score.pk).update(prompt_tokens=prompt, completion_tokens=completion)


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0001_initial"),
        ("evaluation", "0034_outcome_category_reported_error"),
    ]

    operations = [
        migrations.AlterField(
            model_name="runscore",
            name="prompt_tokens",
            field=models.PositiveBigIntegerField(blank=True, default=0, null=True),
        ),
        migrations.AlterField(
            model_name="runscore",
            name="completion_tokens",
            field=models.PositiveBigIntegerField(blank=True, default=0, null=True),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
