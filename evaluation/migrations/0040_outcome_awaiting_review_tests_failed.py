"""A flag on an answer whose tests failed awaits no review (it scores 0 whatever the review says): the review
queue's index follows its rule (evaluation.models.AWAITING_REVIEW), and the stored aggregates of the completed runs
holding such flags are recomputed with the functions the live code uses, so their rows count those items as failed,
not as awaiting review (evaluation.models.SCORED_STATUS; no pass rate changes: either way not passed)."""

from django.conf import settings
from django.db import migrations, models


def runs_with_failed_flags_rescored(apps, schema_editor):
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
    runs = Outcome.objects.filter(status="flagged", measured_status="failed").values("run_id")
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
        ('benchmarks', '0013_versiontask_replaced_by'),
        ('evaluation', '0039_run_asked_again'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='outcome',
            name='outcome_awaiting_review',
        ),
        migrations.AddIndex(
            model_name='outcome',
            index=models.Index(condition=models.Q(('status', 'flagged'), models.Q(('measured_status', 'failed'), _negated=True)), fields=['-created_at'], name='outcome_awaiting_review'),
        ),
        migrations.RunPython(runs_with_failed_flags_rescored, migrations.RunPython.noop),
    ]
