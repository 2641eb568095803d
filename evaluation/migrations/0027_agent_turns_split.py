from django.db import migrations, models


class Migration(migrations.Migration):
    """An agent's turns move between workers: the trajectory knows its stored steps' size and where its workspace is
    kept between tasks."""

    dependencies = [("evaluation", "0026_merge_agent_fixes")]

    operations = [
        migrations.AddField(
            model_name="agenttrajectory",
            name="steps_bytes",
            field=models.PositiveBigIntegerField(
                default=0, help_text="The stored steps' text, capped by AGENT_TRAJECTORY_BYTES."
            ),
        ),
        migrations.AddField(
            model_name="agenttrajectory",
            name="workspace_snapshot",
            field=models.CharField(
                blank=True,
                help_text="Storage name of the workspace as the last stored step left it.",
                max_length=300,
            ),
        ),
    ]
