"""The agent models move to the `agents` app (agents/migrations/0001_initial.py): only Django's record of them
changes; their tables keep their names (`db_table`) and their rows."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0035_runscore_tokens_unknown"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="agenttrajectory",
                    name="run",
                ),
                migrations.RemoveField(
                    model_name="agenttrajectory",
                    name="snippet",
                ),
                migrations.DeleteModel(
                    name="AgentStep",
                ),
                migrations.DeleteModel(
                    name="AgentTrajectory",
                ),
            ],
            database_operations=[],
        ),
    ]
