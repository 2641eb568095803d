"""The event log moves to the operations app: each event names its subject (a model's label and a row's id) instead
of foreign keys into evaluation and submissions; runs count their re-dispatches on the row (operations'
Redispatchable) as set-validation papers did. Every event is carried over with its time; a release's re-dispatch,
which named its release only in the text, gets the release as its subject."""

import re

from django.db import migrations, models

RUN, REPORT, SET_VALIDATION, RELEASE = ("evaluation.evaluationrun", "submissions.validationreport",
                                        "submissions.setvalidation", "benchmarks.benchmarkversion")
RELEASE_NAMED = re.compile(r"the downloads of release (\S+) were being prepared")


def events_forward(apps, schema_editor):
    Old = apps.get_model("evaluation", "OperationsEvent")
    New = apps.get_model("operations", "OperationsEvent")
    Run = apps.get_model("evaluation", "EvaluationRun")
    Version = apps.get_model("benchmarks", "BenchmarkVersion")
    releases = dict(Version.objects.values_list("name", "pk"))
    created = New._meta.get_field("created_at")
    created.auto_now_add = False  # the events keep their own times
    try:
        batch = []
        for old in Old.objects.order_by("pk").iterator(chunk_size=2000):
            kind, subject = "", None
            if old.run_id is not None:
                kind, subject = RUN, old.run_id
            elif old.report_id is not None:
                kind, subject = REPORT, old.report_id
            elif old.set_validation_id is not None:
                kind, subject = SET_VALIDATION, old.set_validation_id
            elif old.kind == "downloads_redispatched" and (named := RELEASE_NAMED.search(old.detail)):
                if named.group(1) in releases:
                    kind, subject = RELEASE, releases[named.group(1)]
            batch.append(New(kind=old.kind, detail=old.detail, worker=old.worker, subject_kind=kind,
                             subject_id=subject, items=old.items, since=old.since, created_at=old.created_at))
            if len(batch) >= 2000:
                New.objects.bulk_create(batch)
                batch = []
        New.objects.bulk_create(batch)
    finally:
        created.auto_now_add = True
    counts = (Old.objects.filter(kind="items_redispatched", run__isnull=False).values("run")
              .annotate(n=models.Count("pk")).values_list("run", "n"))
    for run_id, n in counts:
        Run.objects.filter(pk=run_id).update(redispatches=n)


def events_backward(apps, schema_editor):
    Old = apps.get_model("evaluation", "OperationsEvent")
    New = apps.get_model("operations", "OperationsEvent")
    created = Old._meta.get_field("created_at")
    created.auto_now_add = False
    try:
        columns = {RUN: "run_id", REPORT: "report_id", SET_VALIDATION: "set_validation_id"}
        existing = {label: set(apps.get_model(*label.split(".")).objects.values_list("pk", flat=True))
                    for label in columns}
        Old.objects.bulk_create([
            Old(kind=new.kind, detail=new.detail, worker=new.worker, items=new.items, since=new.since,
                created_at=new.created_at,
                **({columns[new.subject_kind]: new.subject_id}
                   if new.subject_kind in columns and new.subject_id in existing[new.subject_kind] else {}))
            for new in New.objects.order_by("pk")], batch_size=2000)
    finally:
        created.auto_now_add = True
    New.objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0022_run_leaderboard_pin"),
        ("operations", "0001_event_log_and_redispatch"),
        ("submissions", "0005_merge_round_three"),
        ("benchmarks", "0007_merge_round_three"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="redispatches",
            field=models.PositiveIntegerField(default=0, help_text="How often the watchdog queued it again."),
        ),
        migrations.AlterField(
            model_name="evaluationrun",
            name="redispatched_at",
            field=models.DateTimeField(blank=True, help_text="When the watchdog last queued it again.", null=True),
        ),
        migrations.RunPython(events_forward, events_backward),
        migrations.DeleteModel(
            name="OperationsEvent",
        ),
    ]
