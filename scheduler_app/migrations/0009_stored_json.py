"""The JSON fields read with ``readable.json_reader`` (what no page can show becomes U+FFFD).

A decoder is Python only: the state changes, the tables do not (SQLite
would otherwise copy the jobs table once per field).
"""

from django.db import migrations, models

import scheduler_app.sql.readable


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler_app', '0008_flow_control'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='job',
                    name='args',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, default=list),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='errors',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, default=list),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='kwargs',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, default=dict),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='progress',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, null=True),
                ),
                migrations.AlterField(
                    model_name='job',
                    name='result',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, null=True),
                ),
                migrations.AlterField(
                    model_name='schedule',
                    name='args',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, default=list),
                ),
                migrations.AlterField(
                    model_name='schedule',
                    name='kwargs',
                    field=models.JSONField(blank=True, decoder=scheduler_app.sql.readable.json_reader, default=dict),
                ),
                migrations.AlterField(
                    model_name='worker',
                    name='queues',
                    field=models.JSONField(decoder=scheduler_app.sql.readable.json_reader, default=list, help_text='Queues served.'),
                ),
                migrations.AlterField(
                    model_name='worker',
                    name='slots',
                    field=models.JSONField(decoder=scheduler_app.sql.readable.json_reader, default=dict, help_text='Worker slots per queue group.'),
                ),
            ],
            database_operations=[],
        ),
    ]
