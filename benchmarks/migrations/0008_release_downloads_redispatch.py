"""A release's downloads are re-dispatched like every lost work (operations' Redispatchable): the watchdog claims
the row by `redispatched_at` and counts `redispatches`; `downloads_queued_at` stays the time of the first queueing.
Today's state is read from the events about the release."""

from django.db import migrations, models

RELEASE = "benchmarks.benchmarkversion"


def state_forward(apps, schema_editor):
    Event = apps.get_model("operations", "OperationsEvent")
    Version = apps.get_model("benchmarks", "BenchmarkVersion")
    state = (Event.objects.filter(kind="downloads_redispatched", subject_kind=RELEASE, subject_id__isnull=False)
             .values("subject_id").annotate(n=models.Count("pk"), last=models.Max("created_at"))
             .values_list("subject_id", "n", "last"))
    for version_id, n, last in state:
        Version.objects.filter(pk=version_id).update(redispatches=n, redispatched_at=last)


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0007_merge_round_three"),
        ("evaluation", "0023_events_to_operations"),
    ]

    operations = [
        migrations.AddField(
            model_name="benchmarkversion",
            name="redispatched_at",
            field=models.DateTimeField(blank=True, help_text="When the watchdog last queued it again.", null=True),
        ),
        migrations.AddField(
            model_name="benchmarkversion",
            name="redispatches",
            field=models.PositiveIntegerField(default=0, help_text="How often the watchdog queued it again."),
        ),
        migrations.RunPython(state_forward, migrations.RunPython.noop),
    ]
