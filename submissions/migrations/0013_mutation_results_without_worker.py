"""Mutation scores stored before named the worker process that measured them (host and pid): not the author's to
see, and kept on acceptance in the snippet's score. Which worker ran a snippet is in the workers' logs now."""

from django.db import migrations


def _forget(apps, schema_editor):
    for app, name, field in (("submissions", "ValidationCheck", "result"), ("benchmarks", "Snippet", "mutation")):
        model = apps.get_model(app, name)
        for pk, value in model.objects.filter(**{f"{field}__has_key": "worker"}).values_list("pk", field).iterator():
            value.pop("worker", None)
            model.objects.filter(pk=pk).update(**{field: value})


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0012_tried_answer_reindented"),
        ("benchmarks", "0013_versiontask_replaced_by"),
    ]

    operations = [migrations.RunPython(_forget, migrations.RunPython.noop)]
