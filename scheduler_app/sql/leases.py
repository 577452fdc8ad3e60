"""Leases, on both databases: rescue expired ones, renew this dispatcher's, release on shutdown."""

from ..dispatcher.policy import LEASE_EXPIRED_CLASS
from .base import TABLE, _rows, adapt_dt, is_postgres


def _lost_error(alias, pg):
    """The ``errors`` entry a rescue appends, built in SQL from the row itself."""
    a = f"{alias}." if alias else ""
    if pg:
        return (
            f"jsonb_build_object('attempt', {a}attempts, 'time', %s::text, "
            f"'worker', {a}worker, 'exception_class', '{LEASE_EXPIRED_CLASS}', "
            "'message', %s::text, 'traceback', '')"
        )
    return (
        f"json_object('attempt', attempts, 'time', %s, 'worker', worker, "
        f"'exception_class', '{LEASE_EXPIRED_CLASS}', 'message', %s, 'traceback', '')"
    )


def rescue(*, now, limit, message, using="default"):
    """Take back running jobs whose lease expired; return ``[(id, status, queue)]``.

    Rows go back to pending while attempts remain, to failed (a "lost" error)
    when none do, to cancelled when a cancel was requested. The status and
    lease test is the compare-and-set: a job that finished meanwhile no
    longer matches. Return ``[(id, status, queue, has_dependents)]``.
    """
    pg = is_postgres(using)
    t = adapt_dt(now, using)
    time_text = now.isoformat()
    if pg:
        statement = (
            f"WITH c AS (SELECT id FROM {TABLE} WHERE status = 'running' "
            f"AND lease_expires_at < %s ORDER BY lease_expires_at LIMIT %s "
            f"FOR UPDATE SKIP LOCKED) "
            f"UPDATE {TABLE} AS j SET "
            f"status = CASE WHEN j.cancel_requested THEN 'cancelled' "
            f"WHEN j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END, "
            f"errors = j.errors || jsonb_build_array({_lost_error('j', True)}), "
            f"execute_at = CASE WHEN j.attempts < j.max_attempts THEN %s ELSE j.execute_at END, "
            f"finished_at = CASE WHEN j.attempts < j.max_attempts AND NOT j.cancel_requested "
            f"THEN NULL ELSE %s END, "
            f"lease_expires_at = NULL, updated_at = %s "
            f"FROM c WHERE j.id = c.id AND j.status = 'running' AND j.lease_expires_at < %s "
            f"RETURNING j.id, j.status, j.queue, j.has_dependents"
        )
        params = [t, int(limit), time_text, message, t, t, t, t]
    else:
        statement = (
            f"UPDATE {TABLE} SET "
            f"status = CASE WHEN cancel_requested THEN 'cancelled' "
            f"WHEN attempts < max_attempts THEN 'pending' ELSE 'failed' END, "
            f"errors = json_insert(errors, '$[#]', {_lost_error('', False)}), "
            f"execute_at = CASE WHEN attempts < max_attempts THEN %s ELSE execute_at END, "
            f"finished_at = CASE WHEN attempts < max_attempts AND NOT cancel_requested "
            f"THEN NULL ELSE %s END, "
            f"lease_expires_at = NULL, updated_at = %s "
            f"WHERE status = 'running' AND lease_expires_at < %s AND id IN "
            f"(SELECT id FROM {TABLE} WHERE status = 'running' AND lease_expires_at < %s "
            f"ORDER BY lease_expires_at LIMIT %s) "
            f"RETURNING id, status, queue, has_dependents"
        )
        params = [time_text, message, t, t, t, t, t, int(limit)]
    return [(r[0], r[1], r[2], bool(r[3])) for r in _rows(statement, params, using)]


def renew(*, worker, lease_until, using="default"):
    """Extend every lease ``worker`` holds; return ``[(id, cancel_requested)]``."""
    statement = (
        f"UPDATE {TABLE} SET lease_expires_at = %s "
        f"WHERE status = 'running' AND worker = %s RETURNING id, cancel_requested"
    )
    return [(r[0], bool(r[1])) for r in _rows(statement, [adapt_dt(lease_until, using), worker], using)]


def release(rows, *, worker, now, using="default"):
    """Give unfinished attempts back to pending; return the ids that matched.

    ``rows`` are ``(id, attempt)`` pairs of ``worker``; the attempt that was
    interrupted by a shutdown is not counted against the job.
    """
    params = [adapt_dt(now, using), worker]
    conds = []
    for job_id, attempt in rows:
        conds.append("(id = %s AND attempts = %s)")
        params.extend([job_id, attempt])
    statement = (
        f"UPDATE {TABLE} SET status = 'pending', attempts = attempts - 1, "
        f"lease_expires_at = NULL, updated_at = %s "
        f"WHERE status = 'running' AND worker = %s AND ({' OR '.join(conds)}) "
        f"RETURNING id"
    )
    return {r[0] for r in _rows(statement, params, using)}
