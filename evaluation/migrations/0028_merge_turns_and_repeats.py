from django.db import migrations


class Migration(migrations.Migration):
    """Two branches each added a 0027 (the agent turns split, the repeat groups); they touch different fields."""

    dependencies = [
        ("evaluation", "0027_agent_turns_split"),
        ("evaluation", "0027_run_repeat_group"),
    ]

    operations = []
