"""The dispatcher's transitions: claim, finish, renew leases, rescue, release and take back, progress.

Each is one statement from ``sql`` and a compare-and-set: a claim takes only
pending rows; a finish, a renewal, a release and a progress report match only
the attempt they belong to (``status = running AND worker AND attempts``),
so a slow finisher whose attempt was rescued (and maybe claimed again
elsewhere) changes nothing.
"""

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from .. import sql
from ..models import Job, JobStatus
from ..sql import liveness
from ..validation.fields import PROGRESS
from ..vocabulary import storable
from ..vocabulary.claims import KEYED, PLAIN, Claimed
from ..vocabulary.jobs import ClaimedJob
from ..vocabulary.policy import LEASE_EXPIRED_MESSAGE, RELEASED_MESSAGE
from ..vocabulary.wakeup import WakeUp
from .announce import announce, send
from .dependencies import settle
from .finishing import finish_rows, log_rows, report_lost, with_outcomes

logger = logging.getLogger(__name__)


def claim(request, *, finished=(), connection=None, using="default"):
    """Claim what ``request`` (a ``ClaimRequest``) asks for; return ``Claimed`` (jobs, blocked queues, held).

    The one claim of the dispatcher loop, a burst run and ``testing.drain``:
    pending -> running, attempts + 1, lease and worker set, by
    compare-and-set. Outcomes in ``finished`` are recorded first (as
    :func:`finish` does), in the same round trip where the dialect can
    (``sql.Dialect.claim``). ``connection``, a psycopg connection to the same
    PostgreSQL database (the dispatcher's own), runs it as prepared
    statements; without one it runs on Django's connection. Claimed jobs
    come back in claim order (priority, time, FIFO). A ``keyed`` claim fills
    the slots its keyed jobs leave with a ``plain`` one, in the same order.

    Outcomes the database refuses to store do not stop the claim: they are
    written one by one, and one that still fails fails its own job
    (:func:`finish`).
    """
    now = request.now or timezone.now()
    request = replace(
        request,
        now=now,
        queues=tuple(sorted(request.queues)) if request.limit > 0 else (),
        in_flight=tuple(sorted(request.in_flight)),
    )
    lease_until = now + timedelta(seconds=request.lease)
    dialect = sql.dialect(using)

    def statement(outcomes):
        return dialect.claim(
            finish_rows(outcomes),
            request,
            lease_until=lease_until,
            logs=log_rows(outcomes),
            connection=connection,
            using=using,
        )

    won, rows, rooms, held = with_outcomes(statement, list(finished), now, using)
    report_lost(finished, won)
    jobs = _claimed(rows, request.worker, now)
    if request.kind == KEYED and len(jobs) < request.limit:
        rest = replace(
            request, kind=PLAIN, limit=request.limit - len(jobs), in_flight=(*request.in_flight, *(j.id for j in jobs))
        )
        jobs += claim(rest, connection=connection, using=using).jobs
        jobs.sort(key=lambda j: (-j.priority, j.execute_at, j.id))
    return Claimed(jobs, _blocked(rooms, jobs, now), held)


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
            backend=r[15] or "",
        )
        for r in rows
    ]
    claimed.sort(key=lambda j: (-j.priority, j.execute_at, j.id))
    return claimed


def renew_leases(worker, *, lease, now=None, ids=None, using="default"):
    """Extend the leases ``worker`` holds (of ``ids`` only, if given); return ids whose cancel was requested."""
    now = now or timezone.now()
    rows = sql.renew(worker=worker, lease_until=now + timedelta(seconds=lease), ids=ids, using=using)
    return {job_id for job_id, cancel_requested in rows if cancel_requested}


def rescue_expired(*, now=None, limit=500, retry_at=None, using="default"):
    """Take back running jobs whose lease expired; return how many.

    Each rescued attempt counts (a poison pill that kills its dispatcher
    runs out of attempts) and leaves a "lost" error entry; a job with
    attempts left runs again at ``retry_at(task, attempt, now)`` (the retry
    policy's: the task's own backoff), and one whose cancel was requested
    ends cancelled. Jobs back to pending are announced, so every dispatcher
    (this one too) hears of them.
    """
    now = now or timezone.now()
    retry_at = retry_at or (lambda task, attempt, now: now)
    with transaction.atomic(using=using):
        rows = sql.rescue(
            now=now,
            limit=limit,
            message=LEASE_EXPIRED_MESSAGE,
            retry_at=lambda task, attempt: retry_at(task, attempt, now),
            using=using,
        )
        pending = [job_id for job_id, status, _, _ in rows if status == JobStatus.PENDING]
        if pending:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=pending)), using=using)
        settle({job_id: status for job_id, status, _, has in rows if has}, now=now, using=using)
    if rows:
        logger.warning("rescued %d jobs with expired leases", len(rows), extra={"action": "rescue"})
    return len(rows)


def release(worker, attempts, *, now=None, using="default"):
    """Hand unfinished attempts of ``worker`` back at shutdown; return their ids.

    They stay unclaimable until ``worker``'s process is gone (``take_back``):
    a thread cannot be killed, so one may still be running them (invariant
    14). Each gets an ``errors`` entry saying it was released; dispatchers
    are told, to look for the moment they may take them back.
    """
    attempts = list(attempts)
    if not attempts:
        return set()
    now = now or timezone.now()
    with transaction.atomic(using=using):
        ids = sql.release(attempts, worker=worker, now=now, message=RELEASED_MESSAGE, using=using)
        if ids:
            send(WakeUp.of(handed_back=True), using)
    return set(ids)


def take_back(*, now=None, using="default"):
    """Put the attempts handed back by dispatchers now gone back to pending; return ``(taken, waiting)``.

    The handed-back attempt is not counted; a job whose cancel was requested
    ends cancelled (its dependents follow). ``waiting``: handed-back jobs
    whose dispatcher may still run them.
    """
    now = now or timezone.now()
    with transaction.atomic(using=using):
        rows = sql.handed_back(using=using)
        if not rows:
            return 0, 0
        ended = liveness.gone({worker for _, worker in rows}, using=using)
        ids = [job_id for job_id, worker in rows if worker in ended]
        taken = sql.take_back(ids, now=now, using=using)
        pending = [job_id for job_id, status, _, _ in taken if status == JobStatus.PENDING]
        if pending:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=pending)), using=using)
        settle({job_id: status for job_id, status, _, has in taken if has}, now=now, using=using)
    if taken:
        logger.info(
            "took back %d jobs handed back at shutdown by dispatchers now gone",
            len(taken),
            extra={"action": "take_back"},
        )
    return len(taken), len(rows) - len(ids)


def set_progress(job_id, worker, attempt, progress, *, now=None, using="default"):
    """Record a running attempt's progress and when it was reported; return whether the attempt still runs.

    ``progress`` is ``{"current", "total", "message"}``, as ``rules.PROGRESS``
    accepts it (else TypeError or ValueError); ``updated_at`` (ISO 8601) is added.
    """
    now = now or timezone.now()
    checked = PROGRESS.check(progress.get("current"), progress.get("total"), progress.get("message", ""))
    # The message is the task's text: stored as both databases store text (storable).
    progress = storable.clean_value({**checked, "updated_at": now.isoformat()})
    return bool(
        Job.objects.using(using)
        .filter(pk=job_id, status=JobStatus.RUNNING, worker=worker, attempts=attempt)
        .update(progress=progress)
    )
