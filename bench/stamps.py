"""Bench-only: a task records the moment it started into ``bench_stamp``.

Shared by every subject (ours and the peers): the row is written through the
worker's own Django connection, so the harness reads each job's start time
from the database it ran against.
"""

import time

DDL = "CREATE TABLE IF NOT EXISTS bench_stamp (key TEXT, due DOUBLE PRECISION, started DOUBLE PRECISION)"


def record(key, due):
    started = time.time()  # first thing the job does
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_stamp (key, due, started) VALUES (%s, %s, %s)", [str(key), float(due), started]
        )
    return None
