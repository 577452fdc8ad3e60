"""History: the dispatchers' per-minute rollups, written into the database and pruned.

Each dispatcher hands its tallies (``dispatcher.rollups``) to
:func:`record` once a minute; the same call samples every queue's depth,
due count and lag for the minute, and counts the jobs enqueued (by their
``created_at``) in minutes no dispatcher has counted yet. Reads are in
``history`` and ``metrics``.
"""

from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count
from django.db.models.functions import TruncMinute
from django.utils import timezone

from .. import conf
from ..models import Job, Rollup, RollupCursor
from ..sql import rollups as sql
from ..sql.reads import pending_by_queue

# Jobs are counted as enqueued this long after their minute ends: an
# enqueue whose transaction commits later than that is not counted.
ENQUEUED_LAG = timedelta(minutes=2)
ENQUEUED = "enqueued"


def minute_floor(moment):
    return moment.replace(second=0, microsecond=0)


def record(tallies, now=None, *, samples=True, using="default"):
    """Add ``tallies`` (``{(minute epoch, queue, task): Tally}``) and, with ``samples``, this minute's samples.

    Tallies add up (upsert-add), so writing a minute's in several parts
    (every few seconds, for fresh counters) leaves the same history as one write.
    """
    now = now or timezone.now()
    rows = [(datetime.fromtimestamp(m, UTC), q, t, tally) for (m, q, t), tally in sorted(tallies.items())]
    if not samples:
        if rows:
            with transaction.atomic(using=using):
                sql.add_tallies(rows, using=using)
        return
    with transaction.atomic(using=using):
        sql.add_tallies(rows, using=using)
        sql.add_samples(queue_samples(now, using=using), using=using)
    count_enqueued(now, using=using)


def queue_samples(now, *, using="default"):
    """Return ``[(minute, queue, depth, due, lag seconds)]`` for every known queue and any with pending jobs."""
    minute = minute_floor(now)
    found = dict.fromkeys(conf.known_queues(), (0, 0, 0.0))
    for queue, (depth, due, oldest) in pending_by_queue(now, using=using).items():
        lag = (now - oldest).total_seconds() if oldest is not None else 0.0
        found[queue] = (depth, due, round(max(lag, 0.0), 3))
    return [(minute, q, *values) for q, values in sorted(found.items())]


def count_enqueued(now, *, using="default"):
    """Count jobs enqueued in the minutes up to ``now - ENQUEUED_LAG`` that nobody counted yet.

    The minutes are claimed by a compare-and-set on a cursor row, so with
    any number of dispatchers each minute is counted once.
    """
    until = minute_floor(now - ENQUEUED_LAG)
    cursors = RollupCursor.objects.using(using)
    cursor = cursors.filter(name=ENQUEUED).values_list("at", flat=True).first()
    if cursor is None:
        try:
            with transaction.atomic(using=using):
                cursors.create(name=ENQUEUED, at=until)
        except IntegrityError:
            pass  # another dispatcher started counting first
        return 0
    if cursor >= until:
        return 0
    since = max(cursor, until - conf.get("ROLLUP_RETENTION"))
    with transaction.atomic(using=using):
        if not cursors.filter(name=ENQUEUED, at=cursor).update(at=until):
            return 0  # another dispatcher counts these minutes
        counts = (
            Job.objects.using(using)
            .filter(created_at__gte=since, created_at__lt=until)
            .annotate(minute=TruncMinute("created_at"))
            .order_by()
            .values_list("minute", "queue", "task")
            .annotate(n=Count("id"))
        )
        rows = list(counts)
        sql.add_enqueued(rows, using=using)
    return sum(n for *_, n in rows)


def prune(now=None, *, using="default"):
    """Delete rollups older than ``ROLLUP_RETENTION`` (the counters stay); return how many."""
    now = now or timezone.now()
    deleted, _ = Rollup.objects.using(using).filter(minute__lt=now - conf.get("ROLLUP_RETENTION")).delete()
    return deleted
