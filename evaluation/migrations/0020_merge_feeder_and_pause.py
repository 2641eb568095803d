# The feeder's and the pause's migrations came in after 0019 merged the others; 0019 stays as it was first
# applied, so a database migrated to it still upgrades.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0017_run_feeder'),
        ('evaluation', '0017_run_pause_reason'),
        ('evaluation', '0019_merge_round_three'),
    ]

    operations = [
    ]
