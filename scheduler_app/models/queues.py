"""Queues: a row per queue name, with its pause flag and its limits."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..vocabulary.bounds import QUEUE_NAME_MAX

LEDGER_FIELDS = frozenset(
    {"rate_starts", "rate_checked_starts", "rate_checked_window", "rate_checked_at", "rate_checked_period"}
)


class Queue(models.Model):
    """A queue's persisted settings: the pause flag and the limits every dispatcher's claim obeys.

    Rows are seeded from ``SCHEDULER["QUEUES"]`` when a queue is first seen
    (``lifecycle.queues``); after that the row wins.
    """

    name = models.CharField(max_length=QUEUE_NAME_MAX, primary_key=True)
    paused = models.BooleanField(default=False)
    concurrency_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most jobs of this queue running at once, across every dispatcher; empty: no limit.",
    )
    rate_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most jobs of this queue started per rate period, across every dispatcher; empty: no limit.",
    )
    rate_period = models.FloatField(
        default=1.0, db_default=1.0, help_text="Seconds of the rate limit's sliding window."
    )
    updated_at = models.DateTimeField(default=timezone.now)
    # The rate limit's ledger (PostgreSQL; ``sql.limited``), written by the
    # claims only, in their turn at the queue: starts written ever (counted
    # as the most each claim could take), and the last exact count of the
    # window (its starts, when, over which period, and ``rate_starts`` then).
    # Never written by ``save()``: a stale copy would undo claims' counts.
    rate_starts = models.BigIntegerField(default=0, db_default=0, editable=False)
    rate_checked_starts = models.BigIntegerField(default=0, db_default=0, editable=False)
    rate_checked_window = models.BigIntegerField(default=0, db_default=0, editable=False)
    rate_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    rate_checked_period = models.FloatField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(concurrency_limit__isnull=True) | Q(concurrency_limit__gte=1),
                name="queue_concurrency_limit_positive",
            ),
            models.CheckConstraint(
                condition=Q(rate_limit__isnull=True) | Q(rate_limit__gte=1), name="queue_rate_limit_positive"
            ),
            models.CheckConstraint(condition=Q(rate_period__gt=0), name="queue_rate_period_positive"),
        ]

    def save(self, *args, **kwargs):
        if not self._state.adding and kwargs.get("update_fields") is None and not kwargs.get("force_insert"):
            kwargs["update_fields"] = [
                f.name for f in self._meta.concrete_fields if not f.primary_key and f.name not in LEDGER_FIELDS
            ]
        super().save(*args, **kwargs)

    @property
    def limited(self):
        return self.concurrency_limit is not None or self.rate_limit is not None

    def __str__(self):
        return self.name
