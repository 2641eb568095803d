"""The event log of operations: events name their subject (a model label and a row id), so this app needs no other."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='OperationsEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('broker_unavailable', 'Broker unavailable'), ('database_unavailable', 'Database unavailable'), ('items_redispatched', 'Items re-dispatched'), ('validation_redispatched', 'Validation re-dispatched'), ('validation_abandoned', 'Validation given up'), ('downloads_redispatched', 'Downloads re-dispatched'), ('forkserver_started', 'Fork server started'), ('forkserver_cold', 'Fork server off: items start cold')], max_length=30)),
                ('detail', models.TextField()),
                ('worker', models.CharField(blank=True, max_length=200)),
                ('subject_kind', models.CharField(blank=True, help_text="What the event is about: a model's label, e.g. evaluation.evaluationrun (blank: the platform as a whole).", max_length=100)),
                ('subject_id', models.PositiveBigIntegerField(blank=True, null=True)),
                ('items', models.PositiveIntegerField(default=0, help_text='Items queued again (re-dispatch events).')),
                ('since', models.DateTimeField(blank=True, help_text='When the outage began, where known.', null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
                'indexes': [models.Index(fields=['-created_at'], name='operations_event_recent'), models.Index(fields=['subject_kind', 'subject_id'], name='operations_event_subject')],
            },
        ),
    ]
