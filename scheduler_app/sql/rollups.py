"""Rollups and counters: add tallies to rows that several dispatchers share (upsert-add).

One INSERT ... ON CONFLICT DO UPDATE per batch of rows, on both databases:
counts and histogram buckets add up, maxima keep the larger, so the
figures of any number of dispatchers merge in any order.
"""

from django.db import connections

from ..vocabulary.tallies import SLOTS
from .base import adapt_dt, is_postgres

ROLLUP_TABLE = "scheduler_app_rollup"
COUNTER_TABLE = "scheduler_app_counter"
COUNTS = ("started", "succeeded", "failed", "retried", "cancelled")
HISTOGRAM = tuple(f"{h}_{i}" for h in ("wait", "run") for i in range(SLOTS)) + ("wait_sum", "run_sum")
MAXIMA = ("wait_max", "run_max")
SAMPLES = ("depth", "due", "lag")  # rollup rows of a queue (task ""): the largest sample wins
# Rows per statement: about 40 parameters each, far below SQLite's limit.
BATCH = 200


def tally_values(tally):
    """Return a Tally as the values of COUNTS + HISTOGRAM + MAXIMA, in that order."""
    return (
        tally.started,
        tally.succeeded,
        tally.failed,
        tally.retried,
        tally.cancelled,
        *tally.wait.counts,
        *tally.run.counts,
        tally.wait.total,
        tally.run.total,
        tally.wait.max,
        tally.run.max,
    )


def upsert(table, keys, columns, rows, *, add=(), greatest=(), replace=(), using="default"):
    """Insert ``rows`` (tuples of ``keys + columns`` values); on a key already there, combine.

    ``add`` columns add up, ``greatest`` keep the larger value, ``replace``
    take the new one.
    """
    if not rows:
        return
    pg = is_postgres(using)
    larger = "GREATEST" if pg else "MAX"
    sets = [f"{c} = {table}.{c} + excluded.{c}" for c in add]
    sets += [f"{c} = {larger}({table}.{c}, excluded.{c})" for c in greatest]
    sets += [f"{c} = excluded.{c}" for c in replace]
    names = (*keys, *columns)
    placeholders = "(" + ", ".join(["%s"] * len(names)) + ")"
    with connections[using].cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            params = [adapt_dt(v, using) if hasattr(v, "tzinfo") else v for row in batch for v in row]
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES {', '.join([placeholders] * len(batch))} "
                f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)}",
                params,
            )


def add_tallies(rows, using="default"):
    """Add ``[(minute, queue, task, tally)]`` to the rollups and to the never-pruned counters."""
    columns = COUNTS + HISTOGRAM + MAXIMA
    rows_of_minutes = [(minute, queue, task, *tally_values(t)) for minute, queue, task, t in rows]
    _upsert_rollups(columns, rows_of_minutes, add=COUNTS + HISTOGRAM, greatest=MAXIMA, using=using)
    totals = {}
    for _, queue, task, tally in rows:
        values = tally_values(tally)
        mine = totals.get((queue, task))
        if mine is None:
            totals[(queue, task)] = list(values)
        else:
            n = len(COUNTS) + len(HISTOGRAM)
            totals[(queue, task)] = [a + b for a, b in zip(mine[:n], values[:n], strict=True)] + [
                max(a, b) for a, b in zip(mine[n:], values[n:], strict=True)
            ]
    upsert(
        COUNTER_TABLE,
        ("queue", "task"),
        columns,
        [(queue, task, *values) for (queue, task), values in totals.items()],
        add=COUNTS + HISTOGRAM,
        greatest=MAXIMA,
        using=using,
    )


def add_samples(rows, using="default"):
    """Record ``[(minute, queue, depth, due, lag)]`` on each queue's own rollup row (task ``""``)."""
    samples = [(minute, queue, "", *values) for minute, queue, *values in rows]
    _upsert_rollups(SAMPLES, samples, greatest=SAMPLES, using=using)


def add_enqueued(rows, using="default"):
    """Add ``[(minute, queue, task, n)]`` jobs enqueued to the rollups."""
    _upsert_rollups(("enqueued",), [tuple(row) for row in rows], add=("enqueued",), using=using)


def _upsert_rollups(columns, rows, *, add=(), greatest=(), using):
    """Upsert ``rows`` (minute, queue, task, then ``columns``) into the per-minute rollups."""
    upsert(ROLLUP_TABLE, ("minute", "queue", "task"), columns, rows, add=add, greatest=greatest, using=using)
