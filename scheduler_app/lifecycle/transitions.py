"""The dispatcher's transitions: claim, finish, renew leases, rescue, release, progress.

Each is one statement from ``sql`` and a compare-and-set: a claim takes only
pending rows; a finish, a renewal, a release and a progress report match only
the attempt they belong to (``status = running AND worker AND attempts``),
so a slow finisher whose attempt was rescued (and maybe claimed again
elsewhere) changes nothing.
"""

import json
import logging
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from .. import sql
from ..dispatcher.policy import LEASE_EXPIRED_MESSAGE
from ..dispatcher.types import ClaimedJob
from ..models import Job, JobStatus
from ..rules import PROGRESS
from .announce import announce
from .dependencies import settle

logger = logging.getLogger(__name__)


def claim(
    worker, *, queues, limit, lease, now=None, ids=None, finished=(), due_by=None, limits=True,
    connection=None, using="default",
):
    """Claim up to ``limit`` due pending jobs of ``queues`` for ``worker``; return ClaimedJobs.

    One statement: pending -> running, attempts + 1, lease and worker set.
    With ``ids``, only those jobs are candidates. Outcomes in ``finished``
    are recorded first (as :func:`finish` does), in the same round trip on
    PostgreSQL. ``connection``, a psycopg connection to the same PostgreSQL
    database (the dispatcher's own), runs it as a prepared statement;
    without one it runs on Django's connection. Claimed jobs come back in
    claim order (priority, time, FIFO). ``due_by`` (default ``now``) is how
    late a job may be due. Paused and limited queues are left out (limited
    ones have :func:`claim_limited`); ``limits=False`` claims from them too
    (the test helpers' ``drain``; a dispatcher always honours them).
    """
    now = now or timezone.now()
    finished = list(finished)
    queues = sorted(queues) if limit > 0 else []
    lease_until = now + timedelta(seconds=lease)
    if sql.is_postgres(using):
        won, rows = sql.pg_finish_and_claim(
            _finish_rows(finished),
            worker=worker,
            queues=queues,
            limit=max(limit, 0) if queues else 0,
            now=now,
            lease_until=lease_until,
            ids=ids,
            due_by=due_by,
            limits=limits,
            logs=_log_rows(finished),
            connection=connection,
            using=using,
        )
        won |= _finish_rest(finished, won, now, using)
        _report_lost(finished, won)
        return _claimed(rows, worker, now)
    if finished:
        finish(finished, now=now, using=using)
    if limit <= 0 or not queues:
        return []
    rows = sql.sqlite_claim(
        worker=worker, queues=queues, limit=limit, now=now, lease_until=lease_until, ids=ids,
        due_by=due_by, limits=limits, using=using,
    )
    return _claimed(rows, worker, now)


def claim_limited(worker, *, queues, limit, lease, now=None, finished=(), connection=None, using="default"):
    """Claim up to ``limit`` due jobs of ``queues``, at most as many of each limited queue as its limits allow.

    As :func:`claim` by query, for a slot group with limited queues: the
    limits are counted and obeyed in the claim, across every dispatcher
    (``sql.limited``). Return ``(claimed jobs, blocked)``: ``blocked`` maps
    each limited queue left without room to the epoch when its rate window
    next has room, or None when it waits for a running job to end.
    """
    now = now or timezone.now()
    finished = list(finished)
    queues = sorted(queues)
    lease_until = now + timedelta(seconds=lease)
    if sql.is_postgres(using):
        won, rows, rooms = sql.pg_limited_claim(
            _finish_rows(finished), worker=worker, queues=queues, limit=max(limit, 0), now=now,
            lease_until=lease_until, logs=_log_rows(finished), connection=connection, using=using,
        )
        won |= _finish_rest(finished, won, now, using)
        _report_lost(finished, won)
    else:
        if finished:
            finish(finished, now=now, using=using)
        rows, rooms = sql.sqlite_limited_claim(
            worker=worker, queues=queues, limit=max(limit, 0), now=now, lease_until=lease_until, using=using
        )
    jobs = _claimed(rows, worker, now)
    return jobs, _blocked(rooms, jobs, now)


def _blocked(rooms, jobs, now):
    """Return ``{queue: when}`` for the limited queues this claim left without room."""
    taken = {}
    for job in jobs:
        taken[job.queue] = taken.get(job.queue, 0) + 1
    blocked = {}
    for name, oldest, by_concurrency, by_rate, period in rooms:
        n = taken.get(name, 0)
        if by_concurrency is not None and by_concurrency - n <= 0:
            blocked[name] = None  # until one of its running jobs ends
        elif by_rate is not None and by_rate - n <= 0:
            # The window holds rate_limit starts; the oldest leaves it first.
            blocked[name] = (now.timestamp() if oldest is None else oldest) + period
    return blocked


# The stored text of no arguments: a new list or dict without a parse.
_EMPTY = {"[]": list, "{}": dict}


def _load(value, kind):
    """Return stored args/kwargs (JSON text) as ``kind``, or None when the row holds something else."""
    if isinstance(value, str):
        empty = _EMPTY.get(value)
        if empty is not None:
            return empty() if empty is kind else None
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, kind) else None


def _moment(epoch):
    """Return an epoch as an aware datetime; None when there is none or Python cannot hold it."""
    if epoch is None:
        return None
    try:
        return datetime.fromtimestamp(epoch, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _claimed(rows, worker, now):
    """Return ClaimedJobs for claimed rows, in claim order.

    A row written around the service (args that are not a list, kwargs that
    are not an object, a time that is not one) still becomes a ClaimedJob:
    its ``args``/``kwargs`` are None and the executor fails that attempt with
    the reason, instead of one row stopping the dispatcher.
    """
    claimed = [
        ClaimedJob(
            id=r[0],
            task=r[1],
            args=_load(r[2], list),
            kwargs=_load(r[3], dict),
            queue=r[4],
            priority=r[5],
            execute_at=r[6] if r[6] is not None else float("-inf"),
            attempt=r[7],
            max_attempts=r[8],
            timeout=r[9],
            cancel_requested=bool(r[10]),
            worker=worker,
            last_attempted_at=now,
            enqueued_at=_moment(r[11]),
            started_at=_moment(r[12]),
            errors=r[13],
            snoozes=r[14] or 0,
        )
        for r in rows
    ]
    claimed.sort(key=lambda j: (-j.priority, j.execute_at, j.id))
    return claimed


def finish(outcomes, *, now=None, using="default"):
    """Record how claimed attempts ended, in one statement; return the ids that won.

    An outcome whose attempt is no longer the job's running attempt (it was
    rescued, and perhaps claimed again) changes nothing and is not returned.
    """
    outcomes = list(outcomes)
    if not outcomes:
        return set()
    now = now or timezone.now()
    if sql.is_postgres(using):
        won, _ = sql.pg_finish_and_claim(
            _finish_rows(outcomes), worker="", queues=[], limit=0, now=now, lease_until=now, ids=None,
            logs=_log_rows(outcomes), using=using,
        )
    else:
        won = sql.sqlite_finish(_finish_rows(outcomes), now=now, logs=_log_rows(outcomes), using=using)
    won |= _finish_rest(outcomes, won, now, using)
    _report_lost(outcomes, won)
    return won


def _finish_rest(outcomes, won, now, using):
    """Finish the outcomes the plain statement left alone, settling dependents; return the ids that won.

    The plain finish skips jobs that others depend on; they are finished
    here, in a transaction with the statement that settles their dependents
    (``dependencies.settle``): a dependent becomes pending in the same
    transaction that finishes its last dependency. Outcomes that lose here
    too were taken back by a rescue.
    """
    rest = [o for o in outcomes if o.job_id not in won]
    if not rest:
        return set()
    rows = _finish_rows(rest)
    with transaction.atomic(using=using):
        if sql.is_postgres(using):
            won_here, _ = sql.pg_finish_and_claim(
                rows, worker="", queues=[], limit=0, now=now, lease_until=now, ids=None, dependents=True,
                logs=_log_rows(rest), using=using,
            )
        else:
            won_here = sql.sqlite_finish(rows, now=now, dependents=True, logs=_log_rows(rest), using=using)
        settle({o.job_id: o.status for o in rest if o.job_id in won_here}, now=now, using=using)
    return won_here


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
            len(o.logs),
            o.snoozed,
        )
        for o in outcomes
    ]


def _log_rows(outcomes):
    """Return ``(job id, attempt, seq, time, level, logger, message, exc_text)`` for every kept log record."""
    return [(o.job_id, o.attempt, seq, *record) for o in outcomes for seq, record in enumerate(o.logs, 1)]


def renew_leases(worker, *, lease, now=None, using="default"):
    """Extend every lease ``worker`` holds; return ids whose cancel was requested."""
    now = now or timezone.now()
    rows = sql.renew(worker=worker, lease_until=now + timedelta(seconds=lease), using=using)
    return {job_id for job_id, cancel_requested in rows if cancel_requested}


def rescue_expired(*, now=None, limit=500, using="default"):
    """Take back running jobs whose lease expired; return how many.

    Each rescued attempt counts (a poison pill that kills its dispatcher
    runs out of attempts) and leaves a "lost" error entry. Jobs back to
    pending are announced, so every dispatcher (this one too) hears of them.
    """
    now = now or timezone.now()
    with transaction.atomic(using=using):
        rows = sql.rescue(now=now, limit=limit, message=LEASE_EXPIRED_MESSAGE, using=using)
        pending = [job_id for job_id, status, _, _ in rows if status == JobStatus.PENDING]
        if pending:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=pending)), using=using)
        settle({job_id: status for job_id, status, _, has in rows if has}, now=now, using=using)
    if rows:
        logger.warning("rescued %d jobs with expired leases", len(rows), extra={"action": "rescue"})
    return len(rows)


def release(worker, attempts, *, now=None, using="default"):
    """Give unfinished attempts of ``worker`` back to pending (shutdown); return their ids."""
    attempts = list(attempts)
    if not attempts:
        return set()
    now = now or timezone.now()
    with transaction.atomic(using=using):
        ids = sql.release(attempts, worker=worker, now=now, using=using)
        if ids:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=ids)), using=using)
    return ids


def set_progress(job_id, worker, attempt, progress, *, now=None, using="default"):
    """Record a running attempt's progress and when it was reported; return whether the attempt still runs.

    ``progress`` is ``{"current", "total", "message"}``, as ``rules.PROGRESS``
    accepts it (else TypeError or ValueError); ``updated_at`` (ISO 8601) is added.
    """
    now = now or timezone.now()
    checked = PROGRESS.check(progress.get("current"), progress.get("total"), progress.get("message", ""))
    progress = {**checked, "updated_at": now.isoformat()}
    return bool(
        Job.objects.using(using)
        .filter(pk=job_id, status=JobStatus.RUNNING, worker=worker, attempts=attempt)
        .update(progress=progress)
    )

