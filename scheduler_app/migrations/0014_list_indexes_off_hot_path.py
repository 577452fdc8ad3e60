# Issue 28: the list indexes laid out so that a claim and a finish write none
# of them (scheduler_app/sql/indexes.py says which and why). Not atomic:
# PostgreSQL builds and drops them CONCURRENTLY, so enqueues and claims go on
# while an installation migrates.

from django.db import migrations, models
from django.db.models import Q

from scheduler_app.sql import indexes


def forward(apps, schema_editor):
    indexes.lay_out_list_indexes(schema_editor)


def backward(apps, schema_editor):
    indexes.restore_list_indexes(schema_editor)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('scheduler_app', '0013_op_bulk'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forward, backward)],
            state_operations=[
                migrations.RemoveIndex(model_name='job', name='job_queue_id_idx'),
                migrations.RemoveIndex(model_name='job', name='job_task_id_idx'),
                migrations.RemoveIndex(model_name='job', name='job_status_id_idx'),
                migrations.RemoveIndex(model_name='job', name='job_created_at_idx'),
                migrations.AddIndex(
                    model_name='job',
                    index=models.Index(
                        condition=Q(status__in=['waiting', 'failed', 'cancelled']),
                        fields=['status', 'id'],
                        name='job_status_id_idx',
                    ),
                ),
            ],
        ),
    ]
