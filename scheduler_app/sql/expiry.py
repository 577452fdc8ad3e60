"""The expiry sweep: pending and waiting jobs past their ``expires_at`` end cancelled, in one statement.

The claims already refuse an expired job (``base.unexpired``); this makes
its status say so. Compare-and-set on the statuses a job has before it
starts; at most ``limit`` jobs per statement, earliest expiry first, by the
partial index ``job_expiring_idx``. The message names the expiry in UTC, to
the second, on both databases: ``Expired: not started by 2026-11-27T09:00:00Z``.
"""

from .base import TABLE, _rows, adapt_dt, is_postgres, status_in

# The statuses an expiry starts from (``vocabulary.states``), as ``job_expiring_idx`` states them.
EXPIRING = status_in("expire")

EXPIRED_CLASS = "Expired"
EXPIRED_PREFIX = "Expired: not started by "

_PG = (
    f"WITH c AS (SELECT id FROM {TABLE} WHERE {EXPIRING} AND expires_at IS NOT NULL "
    "AND expires_at <= %(now)s ORDER BY expires_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
    f"UPDATE {TABLE} AS j SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s, "
    "errors = j.errors || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'time', %(time)s::text, "
    "'worker', '', 'exception_class', %(cls)s::text, 'message', %(prefix)s::text "
    "|| to_char(j.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'traceback', '')) "
    f"FROM c WHERE j.id = c.id AND {status_in('expire', 'j.')} RETURNING j.id, j.queue, j.has_dependents"
)

_SQLITE = (
    f"UPDATE {TABLE} SET status = 'cancelled', finished_at = %s, updated_at = %s, "
    "errors = json_insert(errors, '$[#]', json_object('attempt', attempts, 'time', %s, 'worker', '', "
    "'exception_class', %s, 'message', %s || strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', expires_at), 'traceback', '')) "
    f"WHERE id IN (SELECT id FROM {TABLE} INDEXED BY job_expiring_idx WHERE {EXPIRING} "
    "AND expires_at IS NOT NULL AND expires_at <= %s ORDER BY expires_at LIMIT %s) "
    f"AND {EXPIRING} RETURNING id, queue, has_dependents"
)


def expire(*, now, limit, using="default"):
    """Cancel up to ``limit`` pending or waiting jobs whose ``expires_at`` is past; return ``[(id, queue, has_dependents)]``."""
    t = adapt_dt(now, using)
    if is_postgres(using):
        params = {
            "now": t,
            "limit": int(limit),
            "time": now.isoformat(),
            "cls": EXPIRED_CLASS,
            "prefix": EXPIRED_PREFIX,
        }
        return [tuple(r) for r in _rows(_PG, params, using)]
    params = [t, t, now.isoformat(), EXPIRED_CLASS, EXPIRED_PREFIX, t, int(limit)]
    return [tuple(r) for r in _rows(_SQLITE, params, using)]
