"""A running attempt's log records, written while it runs (``observability.logflush``).

One statement per flush on PostgreSQL, one short transaction on SQLite,
whatever the number of attempts and records: the log rows are inserted only
for attempts that are still their job's running attempt (compare-and-set on
``status = running AND worker AND attempts``, as the finish is), and
``logs_count`` grows by the same number in the same statement.
"""

import json

from django.db import transaction

from .base import TABLE, _rows
from .postgres import logs_cte, logs_document
from .sqlite import _insert_logs

PG_APPEND = (
    "WITH a AS (SELECT * FROM json_to_recordset(%(attempts)s::json) "
    "AS a(job bigint, worker text, attempt integer, n integer)), "
    f"u AS (UPDATE {TABLE} AS j SET logs_count = j.logs_count + a.n FROM a "
    "WHERE j.id = a.job AND j.status = 'running' AND j.worker = a.worker AND j.attempts = a.attempt "
    "RETURNING j.id), "
    f"{logs_cte('u')} SELECT id FROM u"
)


def pg_append_logs(attempts, logs, *, using="default"):
    """PostgreSQL: insert ``logs`` of the running ``attempts`` ``(job, worker, attempt, count)``; return the ids that won."""
    params = {
        "attempts": json.dumps([{"job": j, "worker": w, "attempt": a, "n": n} for j, w, a, n in attempts]),
        "logs": logs_document(logs),
    }
    return {row[0] for row in _rows(PG_APPEND, params, using)}


def sqlite_append_logs(attempts, logs, *, using="default"):
    """SQLite: as :func:`pg_append_logs`, in one transaction (an UPDATE, then a few multi-row INSERTs)."""
    values, params = [], []
    for job, worker, attempt, count in attempts:
        values.append("(%s, %s, %s, %s)")
        params.extend([job, worker, attempt, count])
    statement = (
        f"WITH a(job, worker, attempt, n) AS (VALUES {', '.join(values)}) "
        f"UPDATE {TABLE} AS j SET logs_count = j.logs_count + a.n FROM a "
        "WHERE j.id = a.job AND j.status = 'running' AND j.worker = a.worker AND j.attempts = a.attempt "
        "RETURNING id"
    )
    with transaction.atomic(using=using):
        won = {row[0] for row in _rows(statement, params, using)}
        _insert_logs([row for row in logs if row[0] in won], using)
    return won
