"""The test entry point is the format's constant (FORMAT.md 1), no longer a column; 0006 carried over what the
columns held. Apart from 0006 so that its row updates and these table changes run in separate transactions."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('submissions', '0006_task_package_fields'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='revision',
            name='test_entry_point',
        ),
        migrations.RemoveField(
            model_name='setvalidationpaper',
            name='test_entry_point',
        ),
        migrations.AlterField(
            model_name='revision',
            name='requirements',
            field=models.TextField(blank=True, help_text='What its tests run in: its requirements file, or the shared environment it was imported or validated with.'),
        ),
        migrations.AlterField(
            model_name='setvalidationpaper',
            name='requirements',
            field=models.TextField(blank=True, help_text='What its tests run in: its requirements file, or the shared environment it was imported or validated with.'),
        ),
    ]
