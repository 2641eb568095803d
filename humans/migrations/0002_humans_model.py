"""The model entry every attempt's run is filed under, made before anyone can register a model of its name."""

from django.db import migrations


def humans_model_create(apps, schema_editor):
    ModelEntry = apps.get_model("evaluation", "ModelEntry")
    if ModelEntry.objects.filter(kind="human").exists():
        return
    name, n = "humans", 1
    while ModelEntry.objects.filter(name=name).exists():  # a user's model took the name first: another one
        n += 1
        name = f"humans-{n}"
    ModelEntry.objects.create(
        name=name, display_name="Humans", kind="human", organization="people on the platform", default_params={}
    )


class Migration(migrations.Migration):
    dependencies = [("humans", "0001_initial"), ("evaluation", "0030_human_mode")]

    operations = [migrations.RunPython(humans_model_create, migrations.RunPython.noop)]
