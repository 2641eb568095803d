"""The task package's fields are written once (an abstract model shared with revisions and set validation papers):
the test entry point is the format's constant, no longer a column (every task ever stored ran paper2code_test.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0007_merge_round_three'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='task',
            name='test_entry_point',
        ),
        migrations.AlterField(
            model_name='task',
            name='requirements',
            field=models.TextField(blank=True, help_text='What its tests run in: its requirements file, or the shared environment it was imported or validated with.'),
        ),
    ]
