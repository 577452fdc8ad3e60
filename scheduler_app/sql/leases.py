"""Leases, on both databases: rescue expired ones, renew this dispatcher's, hand back at shutdown, take back."""

import json

from ..vocabulary.policy import LEASE_EXPIRED_CLASS, RELEASED_CLASS
from .base import TABLE, _in_list, _rows, adapt_dt, ending, is_postgres, status_in


def _entry(alias, pg, exception_class):
    """The ``errors`` entry a rescue or a release appends, built in SQL from the row itself (time, message: params)."""
    a = f"{alias}." if alias else ""
    if pg:
        return (
            f"jsonb_build_object('attempt', {a}attempts, 'time', %s::text, "
            f"'worker', {a}worker, 'exception_class', '{exception_class}', "
            "'message', %s::text, 'traceback', '')"
        )
    return (
        f"json_object('attempt', attempts, 'time', %s, 'worker', worker, "
        f"'exception_class', '{exception_class}', 'message', %s, 'traceback', '')"
    )


def rescue(*, now, limit, message, retry_at, using="default"):
    """Take back running jobs whose lease expired; return ``[(id, status, queue, has_dependents)]``.

    Rows go back to pending at ``retry_at(task, attempt)`` (the task's
    backoff) while attempts remain, and to failed (a "lost" error) when none
    do; a job whose cancel was requested ends cancelled (``base.ending``).
    Two statements, in the caller's transaction: the expired rows are picked
    (and locked, on PostgreSQL), their retry times computed here, then the
    UPDATE; its status and lease test is the compare-and-set: a job that
    finished meanwhile no longer matches.
    """
    pg = is_postgres(using)
    t = adapt_dt(now, using)
    lock = " FOR UPDATE SKIP LOCKED" if pg else ""
    expired = _rows(
        f"SELECT id, task, attempts FROM {TABLE} WHERE {status_in('rescue')} AND lease_expires_at < %s "
        f"ORDER BY lease_expires_at LIMIT %s{lock}",
        [t, int(limit)],
        using,
    )
    if not expired:
        return []
    times = [(job_id, retry_at(task, attempts)) for job_id, task, attempts in expired]
    a = "j." if pg else ""
    status = ending(f"CASE WHEN {a}attempts < {a}max_attempts THEN 'pending' ELSE 'failed' END", f"{a}cancel_requested")
    if pg:
        source = "t AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS t(tid bigint, tat timestamptz))"
        source_params = [json.dumps([{"tid": i, "tat": at.isoformat()} for i, at in times])]
        append = f"errors = j.errors || jsonb_build_array({_entry('j', True, LEASE_EXPIRED_CLASS)})"
    else:
        source = f"t(tid, tat) AS (VALUES {', '.join(['(%s, %s)'] * len(times))})"
        source_params = [v for i, at in times for v in (i, adapt_dt(at, using))]
        append = f"errors = json_insert(errors, '$[#]', {_entry('', False, LEASE_EXPIRED_CLASS)})"
    statement = (
        f"WITH {source} UPDATE {TABLE} AS j SET status = {status}, {append}, "
        f"execute_at = CASE WHEN {status} = 'pending' THEN t.tat ELSE j.execute_at END, "
        f"finished_at = CASE WHEN {status} = 'pending' THEN NULL ELSE %s END, "
        f"lease_expires_at = NULL, updated_at = %s "
        f"FROM t WHERE j.id = t.tid AND {status_in('rescue', 'j.')} AND j.lease_expires_at < %s "
        f"RETURNING {a}id, {a}status, {a}queue, {a}has_dependents"
    )
    params = [*source_params, now.isoformat(), message, t, t, t]
    return [(r[0], r[1], r[2], bool(r[3])) for r in _rows(statement, params, using)]


def renew(*, worker, lease_until, ids=None, using="default"):
    """Extend the leases ``worker`` holds (only those of ``ids`` if given); return ``[(id, cancel_requested)]``.

    The dispatcher names the attempts it still runs: one whose outcome it
    could not write keeps its old lease, which expires, and another
    dispatcher's rescue takes the job back (invariant 13).
    """
    params = [adapt_dt(lease_until, using), worker]
    only = ""
    if ids is not None:
        only = f" AND {_in_list('id', sorted(ids), params, using)}"
    statement = (
        f"UPDATE {TABLE} SET lease_expires_at = %s "
        f"WHERE {status_in('renew')} AND worker = %s{only} RETURNING id, cancel_requested"
    )
    return [(r[0], bool(r[1])) for r in _rows(statement, params, using)]


def release(rows, *, worker, now, message, using="default"):
    """Hand unfinished attempts back at shutdown; return the ids of the rows that matched.

    ``rows`` are ``(id, attempt)`` pairs of ``worker``. The rows stay
    ``running`` (no claim takes them) with no lease (no rescue either) and
    an ``errors`` entry saying the attempt was released: they go back to
    pending only through ``take_back``, once ``worker`` is gone
    (``liveness``), because a thread of it may still be running them.
    """
    if not rows:
        return []
    pg = is_postgres(using)
    conds = []
    params = []
    for job_id, attempt in rows:
        conds.append("(id = %s AND attempts = %s)")
        params.extend([job_id, attempt])
    if pg:
        append = f"errors = errors || jsonb_build_array({_entry('', True, RELEASED_CLASS)})"
    else:
        append = f"errors = json_insert(errors, '$[#]', {_entry('', False, RELEASED_CLASS)})"
    statement = (
        f"UPDATE {TABLE} SET {append}, lease_expires_at = NULL, updated_at = %s "
        f"WHERE {status_in('release')} AND worker = %s AND ({' OR '.join(conds)}) RETURNING id"
    )
    t = adapt_dt(now, using)
    return [r[0] for r in _rows(statement, [now.isoformat(), message, t, worker, *params], using)]


def handed_back(*, limit=500, using="default"):
    """Return ``[(id, worker)]`` of attempts handed back at shutdown and not taken back yet (locked, on PostgreSQL)."""
    lock = " FOR UPDATE SKIP LOCKED" if is_postgres(using) else ""
    return [
        (r[0], r[1])
        for r in _rows(
            f"SELECT id, worker FROM {TABLE} WHERE {status_in('take back')} AND lease_expires_at IS NULL "
            f"ORDER BY id LIMIT %s{lock}",
            [int(limit)],
            using,
        )
    ]


def take_back(ids, *, now, using="default"):
    """Put handed-back attempts ``ids`` back to pending, uncounted; return ``[(id, status, queue, has_dependents)]``.

    The caller checked that their dispatchers are gone. Compare-and-set on
    the handed-back state; a job whose cancel was requested ends cancelled
    instead (``base.ending``).
    """
    if not ids:
        return []
    params = [adapt_dt(now, using)]
    status = ending("'pending'")
    statement = (
        f"UPDATE {TABLE} SET status = {status}, attempts = attempts - 1, "
        f"finished_at = CASE WHEN {status} = 'pending' THEN NULL ELSE %s END, updated_at = %s "
        f"WHERE {status_in('take back')} AND lease_expires_at IS NULL AND {_in_list('id', sorted(ids), params, using)} "
        f"RETURNING id, status, queue, has_dependents"
    )
    params = [adapt_dt(now, using), *params]
    return [(r[0], r[1], r[2], bool(r[3])) for r in _rows(statement, params, using)]
