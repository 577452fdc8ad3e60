"""Why a pending job past its time has not started: the one rule, read for many jobs at once.

A job is late when it is pending and its ``execute_at`` passed more than
``LATE_AFTER`` ago (a job enqueued for now is not late the instant after). Its
reason is its queue's (every late job of a queue waits for the same thing),
the first of these that holds:

``paused``               the queue is paused
``no_dispatcher``        no live dispatcher (a ``Worker`` row with a fresh heartbeat) serves the queue
``concurrency_limited``  the queue's ``concurrency_limit`` jobs are running, or (for
                         one job) ``concurrency_limit`` jobs with its ``concurrency_key`` are
``rate_limited``         the queue's ``rate_limit`` attempts started in its ``rate_period`` window
``no_free_slot``         every live dispatcher that serves the queue has its slots for it busy

and None when none holds (a job due this instant that a dispatcher is
about to claim), or when the job is not late. :func:`late_reasons` reads a
whole page of jobs in at most four queries, none when no job on it is late.
"""

from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.utils import timezone

from ..models import Job, JobStatus, Queue, QueueStart, Worker
from ..sql import readable
from ..vocabulary.bounds import RATE_PERIOD_MAX

LATE_AFTER = timedelta(seconds=1)
PAUSED = "paused"
NO_DISPATCHER = "no_dispatcher"
CONCURRENCY_LIMITED = "concurrency_limited"
RATE_LIMITED = "rate_limited"
NO_FREE_SLOT = "no_free_slot"
# In the order they are checked; the words pages show for each.
REASONS = {
    PAUSED: "queue paused",
    NO_DISPATCHER: "no live dispatcher serves its queue",
    CONCURRENCY_LIMITED: "queue at its concurrency limit",
    RATE_LIMITED: "queue rate-limited",
    NO_FREE_SLOT: "no free slot",
}


def is_late(job, now):
    """Return whether ``job`` is pending past its time by ``LATE_AFTER`` (a time SQLite could not read counts as past)."""
    return job.status == JobStatus.PENDING and (job.execute_at is None or job.execute_at < now - LATE_AFTER)


def late_reasons(jobs, now=None, using="default", *, reasons=None):
    """Return ``{job id: reason or None}`` for ``jobs`` (model instances with status, queue and execute_at).

    ``reasons``: :func:`queue_reasons`' answer for some queues already (not read again).
    """
    now = now or timezone.now()
    known = reasons or {}
    missing = {job.queue for job in jobs if is_late(job, now) and job.queue not in known}
    reasons = {**known, **queue_reasons(missing, now, using)} if missing else known
    late = [job for job in jobs if is_late(job, now)]
    held = held_by_key(late, now) if late else set()
    return {job.pk: _reason(job, reasons.get(job.queue), held) if is_late(job, now) else None for job in jobs}


def held_by_key(jobs, now=None):
    """Return the ids of ``jobs`` held back by their concurrency key: pending, due, and their key at its limit.

    One query, none when no job of ``jobs`` is pending with a key.
    """
    now = now or timezone.now()
    keyed = [
        job
        for job in jobs
        if job.status == JobStatus.PENDING
        and job.concurrency_key
        and isinstance(job.execute_at, datetime)
        and job.execute_at <= now
        and (job.expires_at is None or job.expires_at > now)
    ]
    if not keyed:
        return set()
    running = dict(
        Job.objects.filter(status=JobStatus.RUNNING, concurrency_key__in={job.concurrency_key for job in keyed})
        .values("concurrency_key")
        .annotate(n=Count("id"))
        .values_list("concurrency_key", "n")
    )
    return {job.pk for job in keyed if running.get(job.concurrency_key, 0) >= (job.concurrency_limit or 1)}


def _reason(job, queue_reason, held):
    """Return a late job's reason: its queue's, unless its concurrency key holds it back while the queue could run it."""
    if job.pk in held and queue_reason in (None, NO_FREE_SLOT):
        return CONCURRENCY_LIMITED
    return queue_reason


def late_reason(job, now=None, using="default"):
    """Return the reason ``job`` is late, or None; :func:`attach`'s answer when it has one."""
    if "_late_reason" in job.__dict__:
        return job._late_reason
    return late_reasons([job], now, using)[job.pk]


def attach(jobs, now=None, using="default", *, reasons=None):
    """Read the reasons of ``jobs`` at once and keep each on its job (for :func:`late_reason`); return ``jobs``."""
    reasons = late_reasons(jobs, now, using, reasons=reasons)
    for job in jobs:
        job._late_reason = reasons[job.pk]
    return jobs


# The same, in a word or two: the job list's one-line rows (the words above on hover).
SHORT = {
    PAUSED: "paused",
    NO_DISPATCHER: "no dispatcher",
    CONCURRENCY_LIMITED: "at limit",
    RATE_LIMITED: "rate-limited",
    NO_FREE_SLOT: "no free slot",
}


def label(reason, *, short=False):
    """Return the words a page shows for ``reason`` ("" for None); ``short``: the job list's."""
    return (SHORT if short else REASONS).get(reason, "") if reason else ""


def tally(late_per_queue, reasons):
    """Return ``{reason: late jobs}`` from ``{queue: late jobs}`` and :func:`queue_reasons`' answer, in REASONS' order."""
    counts = {}
    for queue, n in late_per_queue.items():
        if n and reasons.get(queue):
            counts[reasons[queue]] = counts.get(reasons[queue], 0) + n
    return {reason: counts[reason] for reason in REASONS if reason in counts}


def queue_reasons(queues, now=None, using="default"):
    """Return ``{queue: reason or None}``: why a late job of each of ``queues`` waits (at most four queries)."""
    now = now or timezone.now()
    rows = {q.name: q for q in Queue.objects.using(using).filter(name__in=sorted(queues))}
    workers = [
        (w.id, set(readable.worker_queues(w.queues)), readable.worker_slots(w.slots))
        for w in Worker.objects.using(using).alive(now).only("id", "queues", "slots")
    ]
    running = {}  # (dispatcher, queue) -> running jobs
    if workers or any(q.concurrency_limit is not None for q in rows.values()):
        # Every queue's: a shared slot group's other queues take its slots too (a few rows: one per slot at most).
        pairs = Job.objects.using(using).order_by().filter(status=JobStatus.RUNNING)
        for worker, queue, n in pairs.values_list("worker", "queue").annotate(n=Count("id")):
            running[worker, queue] = n
    started = _rate_used([q for q in rows.values() if q.rate_limit is not None], now, using)
    reasons = {}
    for queue in queues:
        row = rows.get(queue)
        serving = [w for w in workers if queue in w[1]]
        in_queue = sum(n for (_, q), n in running.items() if q == queue)
        if row is not None and row.paused:
            reasons[queue] = PAUSED
        elif not serving:
            reasons[queue] = NO_DISPATCHER
        elif row is not None and row.concurrency_limit is not None and in_queue >= row.concurrency_limit:
            reasons[queue] = CONCURRENCY_LIMITED
        elif row is not None and row.rate_limit is not None and started.get(queue, 0) >= row.rate_limit:
            reasons[queue] = RATE_LIMITED
        elif not any(_free_slot(w, queue, running) for w in serving):
            reasons[queue] = NO_FREE_SLOT
        else:
            reasons[queue] = None
    return reasons


def _free_slot(worker, queue, running):
    """Return whether dispatcher ``worker`` ``(id, queues, slots)`` has a free slot for ``queue``.

    A slot group named after a queue (``--queue NAME:SLOTS``) serves that
    queue alone; the other groups (``*``: every queue shares them) serve the rest.
    """
    worker_id, queues, slots = worker
    own = {name for name in slots if name in queues}
    if queue in own:
        capacity, members = slots[queue], {queue}
    else:
        capacity, members = sum(n for name, n in slots.items() if name not in own), queues - own
    busy = sum(running.get((worker_id, member), 0) for member in members)
    return busy < capacity


def _rate_used(rated, now, using):
    """Return ``{queue: attempts started in its rate window}`` for the rate-limited Queue rows ``rated``: one query."""
    if not rated:
        return {}
    counts = {}
    for i, queue in enumerate(rated):
        period = queue.rate_period
        if not 0 < period <= RATE_PERIOD_MAX:  # a row written around the rule (NaN too): the longest window
            period = RATE_PERIOD_MAX
        counts[f"q{i}"] = Count("id", filter=Q(queue=queue.name, started_at__gt=now - timedelta(seconds=period)))
    names = [q.name for q in rated]
    totals = QueueStart.objects.using(using).filter(queue__in=names).aggregate(**counts)
    return {queue.name: totals[f"q{i}"] for i, queue in enumerate(rated)}
