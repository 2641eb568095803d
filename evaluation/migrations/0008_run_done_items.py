"""Count each run's outcomes into `done_items` (run_maybe_finish reads the counter instead of counting)."""

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def count_outcomes(apps, schema_editor):
    EvaluationRun, Outcome = apps.get_model("evaluation", "EvaluationRun"), apps.get_model("evaluation", "Outcome")
    done = Outcome.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(n=Count("pk")).values("n")
    EvaluationRun.objects.update(done_items=Coalesce(Subquery(done), 0))


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0007_outcome_flags'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='done_items',
            field=models.PositiveIntegerField(default=0, help_text='Outcomes recorded, counted as they come: a cheap test of whether the run may be done.'),
        ),
        migrations.RunPython(count_outcomes, migrations.RunPython.noop),
    ]
