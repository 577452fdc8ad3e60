"""What the scheduler records about runs: job logs, per-minute rollups, counters.

Written by the dispatcher (through ``lifecycle`` and ``rollups``), read by
the admin, the API and the metrics; ``models`` imports this module.
"""

from django.db import models

from ..vocabulary.bounds import CURSOR_NAME_MAX, LOGGER_MAX, QUEUE_NAME_MAX, TASK_NAME_MAX
from ..vocabulary.tallies import SLOTS


class JobLog(models.Model):
    """A log record a job's own thread emitted while one of its attempts ran.

    Written while the attempt runs (``logflush``, every second or so) and with
    its outcome (``joblogs`` captures, ``sql`` writes them in the finishing
    statement); deleted with their job. The key is
    (job, attempt, seq): one index for both the key and the job page's
    reads, where a surrogate id and an index on the job cost every insert
    two index entries and a sequence step.
    """

    pk = models.CompositePrimaryKey("job_id", "attempt", "seq")
    # No constraint in the database: its check ran a query per inserted record
    # in the dispatcher's finishing statement. The rows are inserted only for
    # outcomes whose job row the same statement updated, and Django's CASCADE
    # deletes them with their job (retention, purgejobs, the admin).
    job = models.ForeignKey("Job", on_delete=models.CASCADE, related_name="logs", db_index=False, db_constraint=False)
    attempt = models.PositiveIntegerField()
    seq = models.PositiveIntegerField(help_text="The record's place in its attempt's log, from 1.")
    time = models.DateTimeField()
    level = models.PositiveSmallIntegerField(help_text="Python's level number: 20 INFO, 30 WARNING, 40 ERROR.")
    logger = models.CharField(max_length=LOGGER_MAX)
    message = models.TextField()
    exc_text = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-attempt", "-seq"]

    def __str__(self):
        return f"job {self.job_id} attempt {self.attempt} #{self.seq}: {self.message[:60]}"


def _histogram_fields(model, prefix):
    """Add ``<prefix>_0 .. <prefix>_12`` (counts per bucket), ``<prefix>_sum`` and ``<prefix>_max``."""
    for i in range(SLOTS):
        model.add_to_class(f"{prefix}_{i}", models.BigIntegerField(default=0, db_default=0))
    model.add_to_class(f"{prefix}_sum", models.FloatField(default=0.0, db_default=0.0))
    model.add_to_class(f"{prefix}_max", models.FloatField(default=0.0, db_default=0.0))


class Tallies(models.Model):
    """Counts of attempts and their wait/run histograms (buckets: ``vocabulary.tallies.BUCKETS``)."""

    queue = models.CharField(max_length=QUEUE_NAME_MAX)
    task = models.CharField(max_length=TASK_NAME_MAX)
    started = models.BigIntegerField(default=0, db_default=0)
    succeeded = models.BigIntegerField(default=0, db_default=0)
    failed = models.BigIntegerField(default=0, db_default=0)
    retried = models.BigIntegerField(default=0, db_default=0)
    cancelled = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        abstract = True


class Rollup(Tallies):
    """One minute of one queue and task, merged from every dispatcher (upsert-add).

    Rows with an empty ``task`` hold the queue's own samples (``depth``,
    ``due``, ``lag``: the largest seen in that minute). Pruned after
    ``ROLLUP_RETENTION``.
    """

    minute = models.DateTimeField()
    enqueued = models.BigIntegerField(default=0, db_default=0)
    depth = models.BigIntegerField(default=0, db_default=0, help_text="Pending jobs (largest sample of the minute).")
    due = models.BigIntegerField(default=0, db_default=0, help_text="Due pending jobs (largest sample of the minute).")
    lag = models.FloatField(
        default=0.0, db_default=0.0, help_text="Seconds the oldest due job had waited (largest sample)."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["minute", "queue", "task"], name="rollup_key")]
        indexes = [models.Index(fields=["minute"], name="rollup_minute_idx")]


class Counter(Tallies):
    """Totals per queue and task since the first dispatcher ran: never pruned (the metrics' counters)."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "task"], name="counter_key")]


class RollupCursor(models.Model):
    """Where a shared piece of rollup work has got to (``enqueued``: minutes counted so far)."""

    name = models.CharField(max_length=CURSOR_NAME_MAX, primary_key=True)
    at = models.DateTimeField()


_histogram_fields(Rollup, "wait")
_histogram_fields(Rollup, "run")
_histogram_fields(Counter, "wait")
_histogram_fields(Counter, "run")
