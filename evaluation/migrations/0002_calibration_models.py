"""The built-in calibration models: `reference` must score 100% and `placeholder` 0% on any good version."""

from django.db import migrations

CALIBRATION = [
    ("reference", "Reference (calibration)", "Answers with the reference code."),
    ("placeholder", "Placeholder (calibration)", "Answers with the masked placeholder only."),
]


def create(apps, schema_editor):
    ModelEntry = apps.get_model("evaluation", "ModelEntry")
    for name, display, _ in CALIBRATION:
        ModelEntry.objects.get_or_create(name=name, defaults={"display_name": display, "kind": name,
                                                              "organization": "platform"})


def remove(apps, schema_editor):
    apps.get_model("evaluation", "ModelEntry").objects.filter(name__in=[c[0] for c in CALIBRATION]).delete()


class Migration(migrations.Migration):
    dependencies = [("evaluation", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
