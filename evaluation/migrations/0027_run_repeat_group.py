from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0026_merge_agent_fixes"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="repeat_group",
            field=models.UUIDField(
                blank=True, db_index=True, help_text="Shared by the runs one start with repeat > 1 made.", null=True
            ),
        ),
    ]
