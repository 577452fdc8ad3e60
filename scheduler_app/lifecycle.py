"""The job lifecycle: every state change of a job happens here, and only here.

Each transition is one conditional UPDATE (compare-and-set) on the state it
expects; it reports whether it won. The admin, the API, the django.tasks
backend, the management commands and the dispatcher all call this module.

User-facing transitions (enqueue, cancel, retry, reschedule) announce the
change after commit: a ``jobs_changed`` signal in this process and, on
PostgreSQL, a NOTIFY that dispatchers on other hosts LISTEN to.
"""

import contextlib
import json
import logging
import random
import traceback as tb
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connections, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.tasks import Task, task_backends
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import conf, registry, signals, sql
from .models import (
    ACTIVE_STATUSES,
    FINISHED_STATUSES,
    PRIORITY_MAX,
    PRIORITY_MIN,
    Job,
    JobStatus,
    Queue,
)

logger = logging.getLogger(__name__)

MAX_ATTEMPTS_LIMIT = 100
MAX_BULK = 1000
# NOTIFY payloads must stay under 8000 bytes; past this many jobs, dispatchers
# are told to sync instead of being given the jobs.
NOTIFY_MAX_JOBS = 50


class InvalidTransition(Exception):
    """The job is not in a state that allows the change (HTTP 409)."""

    def __init__(self, job_id, status, action, detail=""):
        self.job_id = job_id
        self.status = status
        self.action = action
        message = f"Cannot {action} job {job_id}: it is {status}."
        if detail:
            message = f"Cannot {action} job {job_id}: {detail}"
        super().__init__(message)


class BulkValidationError(ValidationError):
    """Some jobs of a bulk request are invalid; ``by_index`` maps index -> field errors."""

    def __init__(self, by_index):
        self.by_index = by_index
        super().__init__({str(i): [json.dumps(e)] for i, e in by_index.items()})


class LeaseExpired(Exception):
    """Recorded as the error of an attempt whose dispatcher stopped renewing its lease."""


class JobTimeout(Exception):
    """Recorded as the error of an attempt that ran past its timeout."""


# ---------------------------------------------------------------------------
# Validation


def known_queues():
    """Return the queues served by the scheduler backends in settings.TASKS."""
    from .backends import SchedulerBackend

    queues = set()
    for backend in task_backends.all():
        if isinstance(backend, SchedulerBackend):
            queues |= set(backend.queues)
    return queues


def _json_normal(value, field, kind):
    if not isinstance(value, kind):
        name = "a list" if kind in (list, tuple) else "an object"
        raise ValidationError({field: f"Must be {name}."})
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError({field: f"Must be JSON-serializable: {exc}."}) from None


def _resolve_task(task):
    if isinstance(task, Task):
        name = registry.name_of(task)
    else:
        name = task
    try:
        return registry.get(name)
    except registry.UnknownTask as exc:
        raise ValidationError({"task": str(exc)}) from None


def validate_priority(priority):
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError({"priority": "Must be a whole number."})
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValidationError(
            {"priority": f"Must be between {PRIORITY_MIN} and {PRIORITY_MAX}."}
        )
    return priority


def validate_execute_at(value):
    if not isinstance(value, datetime):
        raise ValidationError({"execute_at": "Must be a datetime."})
    if timezone.is_naive(value):
        raise ValidationError(
            {"execute_at": "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00)."}
        )
    return value


def build_job(
    task,
    args=(),
    kwargs=None,
    *,
    execute_at=None,
    priority=None,
    queue=None,
    max_attempts=None,
    timeout=None,
    unique_key=None,
    created_by=None,
    schedule=None,
    now=None,
):
    """Validate a job description and return an unsaved Job.

    Raise ValidationError with errors keyed by field name.
    """
    errors = {}
    now = now or timezone.now()

    def check(fn, *a):
        try:
            return fn(*a)
        except ValidationError as exc:
            errors.update(exc.message_dict)
            return None

    task_obj = check(_resolve_task, task)
    args = check(_json_normal, list(args) if isinstance(args, tuple) else args, "args", list)
    kwargs = check(_json_normal, {} if kwargs is None else kwargs, "kwargs", dict)
    if execute_at is None:
        execute_at = now
    else:
        check(validate_execute_at, execute_at)
    if priority is None and task_obj is not None:
        priority = task_obj.priority
    if priority is not None:
        check(validate_priority, priority)
    if queue is None and task_obj is not None:
        queue = task_obj.queue_name
    if queue is not None and queue not in known_queues():
        errors["queue"] = [
            f"Unknown queue '{queue}'. Known queues: {', '.join(sorted(known_queues()))}."
        ]
    if max_attempts is None:
        max_attempts = conf.get("DEFAULT_MAX_ATTEMPTS")
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    ):
        errors["max_attempts"] = [f"Must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT}."]
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        errors["timeout"] = ["Must be a number of seconds greater than 0."]
    if unique_key is not None and (not isinstance(unique_key, str) or len(unique_key) > 255):
        errors["unique_key"] = ["Must be text of at most 255 characters."]
    if unique_key == "":
        unique_key = None
    if errors:
        raise ValidationError(errors)
    return Job(
        task=registry.name_of(task_obj),
        args=args,
        kwargs=kwargs,
        queue=queue,
        priority=priority,
        execute_at=execute_at,
        max_attempts=max_attempts,
        timeout=float(timeout) if timeout is not None else None,
        unique_key=unique_key,
        created_by=created_by,
        schedule_id=getattr(schedule, "pk", schedule),
        created_at=now,
        updated_at=now,
    )


# ---------------------------------------------------------------------------
# Wake-ups


def announce(*, jobs=(), removed=(), cancel=(), queues=(), queues_changed=False, using="default"):
    """Tell dispatchers, after commit, that jobs were added, changed or removed.

    ``jobs`` are Job instances now pending (new or rescheduled); ``removed``
    are ids no longer pending; ``cancel`` are running jobs whose cancel was
    requested; ``queues_changed`` says a queue was paused or resumed. On PostgreSQL a NOTIFY is queued inside the
    current transaction, so it is delivered exactly when the change commits.
    """
    _send(_payload(jobs, removed, cancel, queues, queues_changed), using)


def _payload(jobs=(), removed=(), cancel=(), queues=(), queues_changed=False):
    jobs = list(jobs)
    queues = set(queues) | {j.queue for j in jobs}
    payload = {"queues": sorted(queues)}
    if queues_changed:
        payload["queues_changed"] = True
    if len(jobs) <= NOTIFY_MAX_JOBS and len(removed) <= NOTIFY_MAX_JOBS:
        payload["jobs"] = [
            [j.pk, j.execute_at.timestamp(), j.priority, j.queue] for j in jobs
        ]
        payload["removed"] = list(removed)
        payload["cancel"] = list(cancel)
    else:
        payload["sync"] = True
    return payload


def _send(payload, using):
    """Queue the NOTIFY (PostgreSQL) in the current transaction; signal in-process after commit."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, %s)", [conf.get("NOTIFY_CHANNEL"), json.dumps(payload)]
            )
    _signal_after_commit(payload, using)


def _signal_after_commit(payload, using):
    """Send ``jobs_changed`` in this process once the current transaction commits."""
    transaction.on_commit(
        lambda: signals.jobs_changed.send(sender=Job, payload=payload), using=using
    )


def announce_schedules(entries, *, using="default"):
    """Tell dispatchers, after commit, that schedules changed.

    ``entries`` are ``(schedule_id, next_run epoch or None)``; None means the
    schedule has nothing to run (disabled, ended or deleted). Same channel
    and signal as :func:`announce`, payload ``{"schedules": [[id, epoch], ...]}``.
    """
    entries = [[int(i), e] for i, e in entries]
    if not entries:
        return
    if len(entries) <= NOTIFY_MAX_JOBS:
        payload = {"queues": [], "schedules": entries}
    else:
        payload = {"queues": [], "sync": True}
    _send(payload, using)


# ---------------------------------------------------------------------------
# Transitions made by people and code (admin, API, backend, commands)


def enqueue(task, args=(), kwargs=None, *, using="default", **options):
    """Create a pending job and return ``(job, created)``.

    With a ``unique_key`` that an active job already holds, return that job
    and ``created=False``; the database's partial unique index settles races.
    """
    job = build_job(task, args, kwargs, **options)
    for _ in range(5):
        if job.unique_key:
            existing = Job.objects.using(using).active().filter(unique_key=job.unique_key).first()
            if existing is not None:
                return existing, False
        try:
            if not job.unique_key and sql.is_postgres(using):
                _insert_and_announce(job, using)
            else:
                with transaction.atomic(using=using):
                    job.save(using=using, force_insert=True)
                    announce(jobs=[job], using=using)
            return job, True
        except IntegrityError:
            if not job.unique_key:
                raise
            job.pk = None
    raise IntegrityError(f"Could not settle unique_key {job.unique_key!r} after retries.")


# An id no real job has: _insert_and_announce splits the payload around it.
_ID_MARK = -918_273_645_546_372_819


def _insert_and_announce(job, using):
    """PostgreSQL: INSERT and NOTIFY in one statement (one round trip outside a transaction).

    Same effect as ``save()`` + :func:`announce` in a transaction, in a
    quarter of the round trips: the enqueue is on the pickup path of every
    job. Inside the caller's transaction it runs in a savepoint, as
    ``transaction.atomic`` would, so a failed insert leaves that transaction usable.
    """
    job.pk = _ID_MARK
    text = json.dumps(_payload(jobs=[job]))
    job.pk = None
    parts = text.split(str(_ID_MARK))
    statement, params = sql.pg_insert_and_notify(
        job, channel=conf.get("NOTIFY_CHANNEL"), payload_parts=parts, using=using
    )
    connection = connections[using]
    savepoint = transaction.atomic(using=using) if connection.in_atomic_block else contextlib.nullcontext()
    with savepoint, connection.cursor() as cursor:
        cursor.execute(statement, params)
        job.pk = cursor.fetchone()[0]
    job._state.adding = False
    job._state.db = using
    _signal_after_commit(_payload(jobs=[job]), using)


def enqueue_many(specs, *, created_by=None, max_size=MAX_BULK, using="default"):
    """Create many jobs in one transaction; all or nothing.

    ``specs`` are dicts of :func:`build_job` keyword arguments (``task``
    required). Raise ValidationError with ``{index: errors}`` if any is
    invalid. A ``unique_key`` held by an active job yields that job in place
    of a new one; two specs with one key is an error. ``max_size=None``
    lifts the per-call limit (for code, not requests).
    """
    if max_size is not None and len(specs) > max_size:
        raise ValidationError({"jobs": f"At most {max_size} jobs per request."})
    now = timezone.now()
    built, errors, keys = [], {}, {}
    for index, spec in enumerate(specs):
        spec = dict(spec)
        try:
            task = spec.pop("task")
            job = build_job(task, created_by=created_by, now=now, **spec)
        except KeyError:
            errors[index] = {"task": ["This field is required."]}
            continue
        except (TypeError, ValidationError) as exc:
            errors[index] = getattr(exc, "message_dict", None) or {"non_field_errors": [str(exc)]}
            continue
        if job.unique_key:
            if job.unique_key in keys:
                errors[index] = {
                    "unique_key": [f"Same unique_key as job {keys[job.unique_key]} of this request."]
                }
                continue
            keys[job.unique_key] = index
        built.append(job)
    if errors:
        raise BulkValidationError(errors)
    with transaction.atomic(using=using):
        existing = {}
        if keys:
            existing = {
                j.unique_key: j
                for j in Job.objects.using(using).active().filter(unique_key__in=list(keys))
            }
        new = [j for j in built if j.unique_key not in existing]
        Job.objects.using(using).bulk_create(new, batch_size=1000)
        if new:
            announce(jobs=new, using=using)
    return [existing.get(j.unique_key, j) if j.unique_key else j for j in built]


def _current_status(job_id, using):
    status = Job.objects.using(using).filter(pk=job_id).values_list("status", flat=True).first()
    if status is None:
        raise Job.DoesNotExist(f"Job {job_id} does not exist.")
    return status


def cancel(job_id, *, now=None, using="default"):
    """Cancel a job: pending ones at once, running ones cooperatively.

    Return "cancelled" or "cancel_requested". Raise InvalidTransition for a
    finished job, Job.DoesNotExist for an unknown one.
    """
    for _ in range(3):
        now = now or timezone.now()
        jobs = Job.objects.using(using).filter(pk=job_id)
        with transaction.atomic(using=using):
            won = jobs.filter(status=JobStatus.PENDING).update(
                status=JobStatus.CANCELLED, finished_at=now, updated_at=now
            )
            if won:
                queue = jobs.values_list("queue", flat=True).first()
                announce(removed=[job_id], queues=[queue], using=using)
                return "cancelled"
        with transaction.atomic(using=using):
            if jobs.filter(status=JobStatus.RUNNING).update(cancel_requested=True, updated_at=now):
                announce(cancel=[job_id], using=using)
                return "cancel_requested"
        status = _current_status(job_id, using)
        if status in FINISHED_STATUSES:
            raise InvalidTransition(job_id, status, "cancel")
    raise InvalidTransition(job_id, status, "cancel", "it changed state during the cancel; try again.")


def cancel_many(job_ids, *, now=None, using="default"):
    """Cancel many jobs; return ``(cancelled, requested, skipped)`` counts."""
    now = now or timezone.now()
    job_ids = list(job_ids)
    jobs = Job.objects.using(using).filter(pk__in=job_ids)
    with transaction.atomic(using=using):
        pending = list(jobs.filter(status=JobStatus.PENDING).values_list("pk", "queue"))
        cancelled = jobs.filter(
            pk__in=[p for p, _ in pending], status=JobStatus.PENDING
        ).update(status=JobStatus.CANCELLED, finished_at=now, updated_at=now)
        if cancelled:
            announce(removed=[p for p, _ in pending], queues={q for _, q in pending}, using=using)
    running = list(
        jobs.filter(status=JobStatus.RUNNING, cancel_requested=False).values_list("pk", flat=True)
    )
    with transaction.atomic(using=using):
        requested = jobs.filter(pk__in=running, status=JobStatus.RUNNING).update(
            cancel_requested=True, updated_at=now
        )
        if requested:
            announce(cancel=running, using=using)
    return cancelled, requested, len(job_ids) - cancelled - requested


def retry(job_id, *, now=None, using="default"):
    """Put a failed or cancelled job back to pending, due now; keep its errors.

    A job that used all its attempts gets one more (as Oban does). Raise
    InvalidTransition when the job is not failed or cancelled, or when
    another active job now holds its unique_key.
    """
    now = now or timezone.now()
    jobs = Job.objects.using(using).filter(pk=job_id)
    try:
        with transaction.atomic(using=using):
            won = jobs.filter(status__in=[JobStatus.FAILED, JobStatus.CANCELLED]).update(
                status=JobStatus.PENDING,
                execute_at=now,
                max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
                cancel_requested=False,
                lease_expires_at=None,
                finished_at=None,
                result=None,
                updated_at=now,
            )
            if won:
                job = jobs.get()
                announce(jobs=[job], using=using)
                return job
    except IntegrityError:
        raise InvalidTransition(
            job_id, "", "retry", "another pending or running job holds its unique_key."
        ) from None
    raise InvalidTransition(job_id, _current_status(job_id, using), "retry")


def retry_many(job_ids, *, using="default"):
    """Retry each job that allows it; return ``(retried, skipped)``."""
    retried = 0
    job_ids = list(job_ids)
    for job_id in job_ids:
        try:
            retry(job_id, using=using)
            retried += 1
        except (InvalidTransition, Job.DoesNotExist):
            pass
    return retried, len(job_ids) - retried


def reschedule(job_id, *, execute_at=None, priority=None, now=None, using="default"):
    """Change when (and how urgently) a pending job runs; return the job.

    Raise ValidationError for bad values, InvalidTransition when the job is
    not pending.
    """
    changes = {}
    if execute_at is not None:
        changes["execute_at"] = validate_execute_at(execute_at)
    if priority is not None:
        changes["priority"] = validate_priority(priority)
    jobs = Job.objects.using(using).filter(pk=job_id)
    with transaction.atomic(using=using):
        changes["updated_at"] = now or timezone.now()
        if jobs.filter(status=JobStatus.PENDING).update(**changes):
            job = jobs.get()
            announce(jobs=[job], using=using)
            return job
    raise InvalidTransition(job_id, _current_status(job_id, using), "reschedule")


def run_now_many(job_ids, *, now=None, using="default"):
    """Make pending jobs due now; return ``(changed, skipped)``."""
    now = now or timezone.now()
    job_ids = list(job_ids)
    jobs = Job.objects.using(using).filter(pk__in=job_ids, status=JobStatus.PENDING)
    with transaction.atomic(using=using):
        changed = jobs.update(execute_at=now, updated_at=now)
        if changed:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=job_ids).pending()), using=using)
    return changed, len(job_ids) - changed


def pause_queue(name, *, using="default"):
    return _set_paused(name, True, using)


def resume_queue(name, *, using="default"):
    return _set_paused(name, False, using)


def _set_paused(name, paused, using):
    if name not in known_queues():
        raise ValidationError({"queue": f"Unknown queue '{name}'."})
    now = timezone.now()
    with transaction.atomic(using=using):
        Queue.objects.using(using).update_or_create(
            name=name, defaults={"paused": paused, "updated_at": now}
        )
        announce(queues=[name], queues_changed=True, using=using)
    return paused


def paused_queues(using="default"):
    return set(Queue.objects.using(using).filter(paused=True).values_list("name", flat=True))


# ---------------------------------------------------------------------------
# Transitions made by the dispatcher


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """One claimed attempt, as the dispatcher and its worker threads see it."""

    id: int
    task: str
    args: list
    kwargs: dict
    queue: str
    priority: int
    execute_at: datetime
    attempt: int
    max_attempts: int
    timeout: float | None
    cancel_requested: bool
    worker: str
    started_at: datetime


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, to be written by :func:`finish`."""

    job_id: int
    worker: str
    attempt: int
    status: str  # succeeded | failed | cancelled | pending (retry later)
    result_json: str | None = None
    error: dict | None = None
    retry_at: datetime | None = None


def _load_json(value):
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _load_dt(value):
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.UTC)
    return value


def claim(worker, *, queues, limit, lease, now=None, ids=None, finished=(), raw=None, using="default"):
    """Claim up to ``limit`` due pending jobs of ``queues`` for ``worker``.

    One statement: pending -> running, attempts + 1, lease and worker set.
    With ``ids``, only those jobs are candidates. Outcomes in ``finished``
    are recorded first (as :func:`finish` does). ``raw``, a psycopg
    connection to the same PostgreSQL database, runs both in one round trip
    as one prepared statement (the dispatcher's hot path). Return ClaimedJob values in claim order (priority, time, FIFO).
    """
    now = now or timezone.now()
    if limit <= 0 or not queues:
        if finished:
            finish(finished, now=now, using=using)
        return []
    if raw is not None:
        rows = _claim_prepared(raw, worker, queues, limit, lease, now, ids, list(finished))
        return _claimed(rows, worker, now)
    statement, params = sql.claim(
        worker=worker,
        queues=queues,
        limit=limit,
        now=now,
        lease_until=now + timedelta(seconds=lease),
        ids=ids,
        using=using,
    )
    if finished:
        finish(finished, now=now, using=using)
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
    return _claimed(rows, worker, now)


def _claim_prepared(raw, worker, queues, limit, lease, now, ids, finished):
    params = sql.pg_finish_and_claim_params(
        _finish_rows(finished),
        worker=worker,
        queues=queues,
        now=now,
        lease_until=now + timedelta(seconds=lease),
        ids=ids,
    )
    with raw.cursor() as cursor:
        cursor.execute(sql.pg_finish_and_claim(ids is not None, limit), params, prepare=True)
        rows = cursor.fetchall()
    _report_lost(finished, {r[0] for r in rows if r[0] is not None})
    return [r[1:] for r in rows if r[0] is None]


def _claimed(rows, worker, now):
    claimed = [
        ClaimedJob(
            id=r[0],
            task=r[1],
            args=_load_json(r[2]),
            kwargs=_load_json(r[3]),
            queue=r[4],
            priority=r[5],
            execute_at=_load_dt(r[6]),
            attempt=r[7],
            max_attempts=r[8],
            timeout=r[9],
            cancel_requested=bool(r[10]),
            worker=worker,
            started_at=now,
        )
        for r in rows
    ]
    claimed.sort(key=lambda j: (-j.priority, j.execute_at, j.id))
    return claimed


def backoff(attempt, *, rng=random):
    """Return seconds to wait before retrying after failed ``attempt`` (1-based)."""
    base = conf.get("RETRY_BACKOFF_BASE")
    delay = min(base * 2 ** (attempt - 1), conf.get("RETRY_BACKOFF_MAX"))
    jitter = conf.get("RETRY_JITTER")
    return max(0.0, delay * (1 + rng.uniform(-jitter, jitter)))


def error_entry(job, exc, *, now, traceback_text=None):
    """Return the errors-list entry describing ``exc`` for attempt ``job``."""
    exc_type = type(exc)
    if traceback_text is None:
        traceback_text = "".join(tb.format_exception(exc))
    return {
        "attempt": job.attempt,
        "time": now.isoformat(),
        "worker": job.worker,
        "exception_class": f"{exc_type.__module__}.{exc_type.__qualname__}",
        "message": str(exc)[:2000],
        "traceback": traceback_text[-20000:],
    }


def failure_outcome(job, exc, *, now, traceback_text=None):
    """Return the Outcome for an attempt that raised (or timed out).

    While attempts remain the job goes back to pending after a backoff;
    otherwise it fails.
    """
    error = error_entry(job, exc, now=now, traceback_text=traceback_text)
    if job.attempt < job.max_attempts:
        retry_at = now + timedelta(seconds=backoff(job.attempt))
        return Outcome(job.id, job.worker, job.attempt, JobStatus.PENDING, error=error, retry_at=retry_at)
    return Outcome(job.id, job.worker, job.attempt, JobStatus.FAILED, error=error)


def success_outcome(job, value):
    """Return the Outcome for an attempt that returned ``value``.

    A value that is not JSON fails the attempt (without retry: it would fail
    the same way again).
    """
    try:
        result_json = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        error = error_entry(job, TypeError(f"Task result is not JSON-serializable: {exc}"), now=timezone.now(), traceback_text="")
        return Outcome(job.id, job.worker, job.attempt, JobStatus.FAILED, error=error)
    return Outcome(job.id, job.worker, job.attempt, JobStatus.SUCCEEDED, result_json=result_json)


def finish(outcomes, *, now=None, using="default"):
    """Record how claimed attempts ended, in one statement; return the ids that won.

    An outcome whose attempt is no longer the job's running attempt (it was
    rescued, and perhaps claimed again) changes nothing and is not returned.
    """
    outcomes = list(outcomes)
    if not outcomes:
        return set()
    now = now or timezone.now()
    statement, params = sql.finish(_finish_rows(outcomes), now=now, using=using)
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        won = {r[0] for r in cursor.fetchall()}
    _report_lost(outcomes, won)
    return won


def _report_lost(outcomes, won):
    lost = [o.job_id for o in outcomes if o.job_id not in won]
    if lost:
        logger.warning(
            "results of %d attempts arrived after the attempt was taken back "
            "(lease expired) and were discarded: jobs %s",
            len(lost), lost[:20], extra={"action": "finish_lost"},
        )


def _finish_rows(outcomes):
    return [
        (
            o.job_id,
            o.worker,
            o.attempt,
            str(o.status),
            o.result_json,
            json.dumps(o.error) if o.error is not None else None,
            o.retry_at,
        )
        for o in outcomes
    ]


def renew_leases(worker, *, lease, now=None, using="default"):
    """Extend every lease ``worker`` holds; return ids whose cancel was requested."""
    now = now or timezone.now()
    statement, params = sql.renew(
        worker=worker, lease_until=now + timedelta(seconds=lease), now=now, using=using
    )
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        return {r[0] for r in cursor.fetchall() if r[1]}


def rescue_expired(*, now=None, limit=500, using="default"):
    """Take back running jobs whose lease expired; return ``[(id, status, queue)]``.

    Each rescued attempt counts (a poison pill that kills its dispatcher
    runs out of attempts) and leaves a "lost" error entry.
    """
    now = now or timezone.now()
    statement, params = sql.rescue(
        now=now,
        limit=limit,
        message="Lost: the dispatcher running this attempt stopped renewing its lease.",
        using=using,
    )
    with transaction.atomic(using=using):
        with connections[using].cursor() as cursor:
            cursor.execute(statement, params)
            rows = cursor.fetchall()
        if rows:
            pending = [r[0] for r in rows if r[1] == JobStatus.PENDING]
            if pending:
                announce(
                    jobs=list(Job.objects.using(using).filter(pk__in=pending)), using=using
                )
    if rows:
        logger.warning(
            "rescued %d jobs with expired leases", len(rows), extra={"action": "rescue"}
        )
    return [tuple(r) for r in rows]


def release(worker, attempts, *, now=None, using="default"):
    """Give unfinished attempts of ``worker`` back to pending (shutdown); return ids."""
    attempts = list(attempts)
    if not attempts:
        return set()
    now = now or timezone.now()
    statement, params = sql.release(attempts, worker=worker, now=now, using=using)
    with transaction.atomic(using=using):
        with connections[using].cursor() as cursor:
            cursor.execute(statement, params)
            ids = {r[0] for r in cursor.fetchall()}
        if ids:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=ids)), using=using)
    return ids


def set_progress(job_id, worker, attempt, progress, *, using="default"):
    """Record a running attempt's progress; return whether the attempt still runs."""
    progress = json.loads(json.dumps(progress, allow_nan=False))
    return bool(
        Job.objects.using(using)
        .filter(pk=job_id, status=JobStatus.RUNNING, worker=worker, attempts=attempt)
        .update(progress=progress)
    )


def prune(*, now=None, retention=None, batch=None, max_batches=None, statuses=None, using="default"):
    """Delete finished jobs older than their retention, in batches; return the count.

    ``retention`` maps status -> timedelta (default: the RETENTION setting).
    """
    now = now or timezone.now()
    retention = retention or conf.get("RETENTION")
    batch = batch or conf.get("PRUNE_BATCH")
    deleted = 0
    for status, age in retention.items():
        if statuses and status not in statuses:
            continue
        if status not in FINISHED_STATUSES:
            raise ValueError(f"Only finished jobs can be pruned, not {status!r}.")
        cutoff = now - age
        batches = 0
        while max_batches is None or batches < max_batches:
            ids = list(
                Job.objects.using(using)
                .filter(status=status, finished_at__lt=cutoff)
                .order_by("finished_at")
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            count, _ = Job.objects.using(using).filter(pk__in=ids, status=status).delete()
            deleted += count
            batches += 1
    return deleted


__all__ = [
    "ACTIVE_STATUSES",
    "ClaimedJob",
    "InvalidTransition",
    "Outcome",
    "cancel",
    "cancel_many",
    "claim",
    "enqueue",
    "enqueue_many",
    "finish",
    "prune",
    "release",
    "renew_leases",
    "rescue_expired",
    "reschedule",
    "retry",
]
