"""A validation report counts its re-dispatches on its row (operations' Redispatchable) instead of deriving them
from the event log: today's state is read from the events that were about it."""

from django.db import migrations, models

REPORT = "submissions.validationreport"


def state_forward(apps, schema_editor):
    Event = apps.get_model("operations", "OperationsEvent")
    Report = apps.get_model("submissions", "ValidationReport")
    state = (Event.objects.filter(kind="validation_redispatched", subject_kind=REPORT, subject_id__isnull=False)
             .values("subject_id").annotate(n=models.Count("pk"), last=models.Max("created_at"))
             .values_list("subject_id", "n", "last"))
    for report_id, n, last in state:
        Report.objects.filter(pk=report_id).update(redispatches=n, redispatched_at=last)


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0005_merge_round_three"),
        ("evaluation", "0023_events_to_operations"),
    ]

    operations = [
        migrations.AddField(
            model_name="validationreport",
            name="redispatched_at",
            field=models.DateTimeField(blank=True, help_text="When the watchdog last queued it again.", null=True),
        ),
        migrations.AddField(
            model_name="validationreport",
            name="redispatches",
            field=models.PositiveIntegerField(default=0, help_text="How often the watchdog queued it again."),
        ),
        migrations.RunPython(state_forward, migrations.RunPython.noop),
    ]
