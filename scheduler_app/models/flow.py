"""The tables of flow control: job dependencies, unique-key windows, rate-limit windows.

Imported by ``models`` (so Django registers them); they refer to ``Job``
by name. State changes happen in ``lifecycle``; the dispatcher's claims
read and write ``QueueStart`` in SQL (``sql``).
"""

from django.db import models

from ..vocabulary.bounds import QUEUE_NAME_MAX, UNIQUE_KEY_MAX


class JobDependency(models.Model):
    """``job`` runs only after ``depends_on`` succeeded (an edge of a workflow)."""

    job = models.ForeignKey("Job", on_delete=models.CASCADE, related_name="+", db_index=False)
    depends_on = models.ForeignKey("Job", on_delete=models.CASCADE, related_name="+", db_index=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "depends_on"], name="job_dependency_unique")]
        # A finish looks up the dependents of the jobs it finished.
        indexes = [models.Index(fields=["depends_on", "job"], name="job_dependency_reverse_idx")]


class UniqueWindow(models.Model):
    """A unique key taken by a job created with ``unique_for``, until ``expires_at``.

    The primary key makes the database the judge: taking a key is one
    INSERT ... ON CONFLICT that succeeds only when no window holds it, or
    the one that does has expired or belongs to a cancelled job (a failed
    or succeeded one keeps it).
    """

    key = models.CharField(max_length=UNIQUE_KEY_MAX, primary_key=True)
    job = models.ForeignKey("Job", null=True, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="unique_window_expiry_idx")]


class QueueStart(models.Model):
    """One attempt started in a rate-limited queue: the rate limit's sliding window counts these.

    Written by the claims of rate-limited queues only, and deleted by them a
    minute after they left the queue's window (``sql.limited.RATE_START_KEEP``),
    so the table holds at most about ``rate_limit`` rows per queue for every
    ``rate_period`` in the window and that minute.
    """

    queue = models.CharField(max_length=QUEUE_NAME_MAX)
    started_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["queue", "started_at"], name="queue_start_window_idx")]
