"""Read-only numbers about jobs, queues and workers, for the API and the dashboard.

Every query here is served by an index (pending/running partial indexes,
finished_at, status) so the numbers stay cheap with millions of rows.
"""

from datetime import datetime, timedelta

from django.db.models import Count, F, Min, Q, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from .. import conf, schedules, sql
from ..models import FINISHED_STATUSES, Job, JobDependency, JobStatus, Queue, QueueStart, Worker
from ..sql import readable
from ..sql.readable import END_OF_TIME
from ..vocabulary.bounds import DEPENDENTS_SHOWN, RATE_PERIOD_MAX
from .lateness import LATE_AFTER

# Past this many rows (PostgreSQL's own estimate), finished-status counts come
# from the planner's statistics instead of a scan of every finished row.
EXACT_COUNT_LIMIT = 200_000


# The queue of finished counts that are an estimate (not split by queue).
ALL_QUEUES = "*"


def job_counts(*, by_queue=False):
    """Return ``{status: count}`` for every status (zeros included): the jobs in it now.

    ``by_queue``: ``{(queue, status): count}`` instead, for the pairs that
    have jobs; their sum by status is the plain answer (the dashboard's and
    ``/metrics``' ``scheduler_jobs``: one count).

    Pending, waiting and running are always exact (small partial indexes).
    On PostgreSQL tables past EXACT_COUNT_LIMIT rows, finished statuses are
    the planner's estimate (table rows x the status's frequency in pg_stats),
    refreshed by autovacuum's ANALYZE; by queue, they come under ALL_QUEUES.
    """
    found = {}
    estimated = sql.estimated_value_counts(Job, "status", FINISHED_STATUSES, min_rows=EXACT_COUNT_LIMIT)
    jobs = Job.objects.order_by()
    if estimated is not None:
        jobs = jobs.active()
        found.update(((ALL_QUEUES, status), n) for status, n in estimated.items())
    for row in jobs.values("queue", "status").annotate(n=Count("id")):
        found[(row["queue"], row["status"])] = row["n"]
    if by_queue:
        return found
    counts = dict.fromkeys(JobStatus.values, 0)
    for (_, status), n in found.items():
        counts[status] = counts.get(status, 0) + n
    return counts


def worker_slots(worker):
    """Return ``{queue: slots}`` one worker gives; a shared pool counts for each queue."""
    slots = readable.worker_slots(worker.slots)  # a row of another shape counts for nothing
    shared = slots.pop("*", None)
    result = dict(slots)
    if shared:
        for q in readable.worker_queues(worker.queues):
            result.setdefault(q, shared)
    return result


def _queue_row(name):
    # A queue without a row yet shows the limits its row will be made with.
    return {
        "name": name,
        "paused": False,
        "pending": 0,
        "waiting": 0,
        "due": 0,
        "running": 0,
        "oldest_due_lag_seconds": 0.0,
        "late": 0,  # pending past their time by lateness.LATE_AFTER
        "slots": 0,
        **conf.queue_defaults(name),
        "rate_used": 0,
    }


def queues(now=None):
    """Return one dict per queue (known, flagged, or holding active jobs): name,
    paused, pending, waiting, due, running, oldest_due_lag_seconds, late, slots, and
    the limits with their use: concurrency_limit (against running),
    rate_limit and rate_period (against rate_used, the starts in the window)."""
    now = now or timezone.now()
    rows = {name: _queue_row(name) for name in conf.known_queues()}
    active = (
        Job.objects.active()
        .order_by()
        .values("queue")
        .annotate(
            pending=Count("id", filter=Q(status=JobStatus.PENDING)),
            waiting=Count("id", filter=Q(status=JobStatus.WAITING)),
            due=Count("id", filter=Q(status=JobStatus.PENDING, execute_at__lte=now)),
            running=Count("id", filter=Q(status=JobStatus.RUNNING)),
            oldest_due=Min("execute_at", filter=Q(status=JobStatus.PENDING, execute_at__lte=now)),
            late=Count("id", filter=Q(status=JobStatus.PENDING, execute_at__lt=now - LATE_AFTER)),
        )
    )
    for row in active:
        entry = rows.setdefault(row["queue"], _queue_row(row["queue"]))
        entry.update(
            pending=row["pending"], waiting=row["waiting"], due=row["due"], running=row["running"], late=row["late"]
        )
        if row["oldest_due"] is not None:
            entry["oldest_due_lag_seconds"] = round((now - row["oldest_due"]).total_seconds(), 3)
    for queue in Queue.objects.all():
        entry = rows.setdefault(queue.name, _queue_row(queue.name))
        entry.update(
            paused=queue.paused,
            concurrency_limit=queue.concurrency_limit,
            rate_limit=queue.rate_limit,
            rate_period=queue.rate_period,
        )
        entry["rate_used"] = _rate_used(queue, now)
    for worker in Worker.objects.alive(now):
        for q, n in worker_slots(worker).items():
            if q in rows:
                rows[q]["slots"] += n
    return [rows[name] for name in sorted(rows)]


def queue_use(queue, now=None):
    """Return a Queue row's limits and their use now: running jobs, and starts in its rate window."""
    return {
        "concurrency_limit": queue.concurrency_limit,
        "rate_limit": queue.rate_limit,
        "rate_period": queue.rate_period,
        "running": Job.objects.running().filter(queue=queue.name).count(),
        "rate_used": _rate_used(queue, now or timezone.now()),
    }


def _rate_used(queue, now):
    """Return how many attempts of a rate-limited queue started in its window (0 without a rate limit)."""
    if queue.rate_limit is None:
        return 0
    period = queue.rate_period
    if not 0 < period <= RATE_PERIOD_MAX:  # a row written around the rule (NaN fails too): the longest window
        period = RATE_PERIOD_MAX
    since = now - timedelta(seconds=period)
    return QueueStart.objects.filter(queue=queue.name, started_at__gt=since).count()


def job_links(jobs, limit=DEPENDENTS_SHOWN):
    """Return ``{job id: {"depends_on": [(id, status)], "dependents": [(id, status)]}}`` for ``jobs``.

    At most two queries, none for jobs without dependencies or dependents;
    at most ``limit`` dependents per job (by id; ``GET /api/jobs/?depends_on=ID``
    lists them all).
    """
    links = {job.pk: {"depends_on": [], "dependents": []} for job in jobs}
    waits = [job.pk for job in jobs if job.has_dependencies]
    awaited = [job.pk for job in jobs if job.has_dependents]
    if waits:
        rows = JobDependency.objects.filter(job_id__in=waits).order_by("depends_on_id")
        for job_id, other, status in rows.values_list("job_id", "depends_on_id", "depends_on__status"):
            links[job_id]["depends_on"].append((other, status))
    if awaited:
        rows = (
            JobDependency.objects.filter(depends_on_id__in=awaited)
            .annotate(n=Window(RowNumber(), partition_by=F("depends_on_id"), order_by=F("job_id").asc()))
            .filter(n__lte=limit)
            .order_by("job_id")
        )
        for job_id, other, status in rows.values_list("depends_on_id", "job_id", "job__status"):
            links[job_id]["dependents"].append((other, status))
    return links


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


def oldest_due_lag(now=None):
    """Return seconds the oldest due pending job has waited (0.0 when none)."""
    now = now or timezone.now()
    oldest = Job.objects.due(now).order_by("execute_at").values_list("execute_at", flat=True).first()
    return round((now - oldest).total_seconds(), 3) if oldest else 0.0


def throughput(now=None):
    """Return finished (succeeded or failed) job counts for the last minute and hour."""
    now = now or timezone.now()
    finished = Job.objects.filter(
        status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED], finished_at__gte=now - timedelta(hours=1)
    )
    agg = finished.aggregate(
        last_hour=Count("id"), last_minute=Count("id", filter=Q(finished_at__gte=now - timedelta(minutes=1)))
    )
    return {"last_minute": agg["last_minute"], "last_hour": agg["last_hour"]}


# ---------------------------------------------------------------------------
# Rows for the dashboard: model instances with only the columns it shows.


def upcoming_jobs(now=None, limit=20, *, skip_queues=()):
    """Return the next pending jobs in the order they will run.

    Due jobs first, in claim order (priority desc, execute_at, id); then
    future jobs by execute_at, id. Each half is served by a partial pending
    index. ``skip_queues`` (the paused ones) are left out: their jobs do not
    run until the queue resumes. With several queues the dispatcher claims
    per queue, so across queues this order is the global intent, not a promise.
    """
    now = now or timezone.now()
    # What the rows show, and what held_by_key reads of them (no deferred load per row).
    fields = ["id", "task", "queue", "priority", "execute_at", "attempts", "max_attempts", "status"]
    fields += ["concurrency_key", "concurrency_limit", "expires_at"]
    pending = Job.objects.exclude(queue__in=list(skip_queues)) if skip_queues else Job.objects
    due = list(pending.due(now).in_claim_order().only(*fields)[:limit])
    if len(due) >= limit:
        return due
    future = pending.pending().filter(execute_at__gt=now).order_by("execute_at", "id").only(*fields)
    return due + list(future[: limit - len(due)])


def upcoming(now=None, limit=20, *, skip_queues=(), jobs=True, runs=True):
    """Return the next pending jobs and the next runs of enabled schedules, in run order.

    A list of ``Job`` and ``Schedule`` instances: due jobs keep their claim
    order at the top; future jobs and schedule runs follow by time (a job
    before a schedule run at the same time). ``jobs=False`` or ``runs=False``
    leaves one kind out (a reader who may not see it).
    """
    now = now or timezone.now()
    jobs = upcoming_jobs(now, limit, skip_queues=skip_queues) if jobs else []
    runs = [run for run in schedules.upcoming(now, limit) if run.queue not in skip_queues] if runs else []
    if not runs:
        return jobs
    # A time that is None (SQLite text that is no time: readable.py) is due, as the dispatcher takes it.
    due = [j for j in jobs if j.execute_at is None or j.execute_at <= now]
    later = [j for j in jobs if j.execute_at is not None and j.execute_at > now] + runs
    later.sort(key=lambda row: row.execute_at if isinstance(row, Job) else row.next_run_at or END_OF_TIME)
    return (due + later)[:limit]


def running_jobs(limit=50):
    """Return running jobs, longest-running (this attempt) first."""
    fields = [
        "id",
        "task",
        "queue",
        "worker",
        "attempts",
        "max_attempts",
        "started_at",
        "last_attempted_at",
        "progress",
        "cancel_requested",
    ]
    since = Coalesce("last_attempted_at", "started_at")
    return list(Job.objects.running().order_by(since, "id").only(*fields)[:limit])


def recent_failures(limit=10):
    """Return the last failed jobs, most recent first (with their errors)."""
    fields = ["id", "task", "queue", "attempts", "finished_at", "errors"]
    return list(Job.objects.filter(status=JobStatus.FAILED).order_by("-finished_at", "-id").only(*fields)[:limit])


def recent_workers(now=None, limit=50):
    """Return live dispatchers, and the ones that stopped or went silent in the last hour."""
    now = now or timezone.now()
    recent = Q(state="alive") | Q(last_heartbeat__gte=now - timedelta(hours=1))
    return list(Worker.objects.filter(recent).order_by("-last_heartbeat")[:limit])


def overview(now=None):
    """Return the /api/stats/ document."""
    now = now or timezone.now()
    return {
        "jobs": job_counts(),
        "queues": {
            q["name"]: {"pending": q["pending"], "waiting": q["waiting"], "due": q["due"], "running": q["running"]}
            for q in queues(now)
        },
        "oldest_due_lag_seconds": oldest_due_lag(now),
        "throughput": throughput(now),
        "workers": {"alive": Worker.objects.alive(now).count()},
    }
