# The operator's toolkit (issue 26): tags and meta read like every stored
# JSON column; on PostgreSQL, the indexes of ?search= (trigrams over the
# job's text) and ?tag= (GIN over tags). SQLite scans (sql/search.py).
# pg_trgm is created by sql/search.py on PostgreSQL only: importing
# django.contrib.postgres here would need psycopg on SQLite installs too.

from django.db import migrations, models

import scheduler_app.sql.readable
from scheduler_app.sql import search


def add_indexes(apps, schema_editor):
    search.add_indexes(schema_editor)


def remove_indexes(apps, schema_editor):
    search.remove_indexes(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler_app', '0012_op_runtime'),
    ]

    operations = [
        migrations.AlterField(
            model_name='job',
            name='meta',
            field=models.JSONField(blank=True, db_default={}, decoder=scheduler_app.sql.readable.json_reader, default=dict),
        ),
        migrations.AlterField(
            model_name='job',
            name='tags',
            field=models.JSONField(blank=True, db_default=[], decoder=scheduler_app.sql.readable.json_reader, default=list),
        ),
        migrations.RunPython(add_indexes, remove_indexes),
    ]
