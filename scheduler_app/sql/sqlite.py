"""SQLite: the claim and the batched finish (one statement each), and planner statistics."""

from datetime import UTC, datetime

from django.db import connections, transaction

from .base import (
    LOG_TABLE,
    NOT_PAUSED_NOR_LIMITED,
    TABLE,
    _in_list,
    _rows,
    adapt_dt,
    claim_returning,
    ending,
    is_sqlite,
    unkeyed_unexpired,
)


def sqlite_optimize(using="default"):
    """SQLite: let the planner have statistics (``PRAGMA optimize``, bounded).

    SQLite only gathers statistics when asked; without them it plans the
    dispatcher's queries from guesses (the change poll scanned every pending
    row). ``optimize`` analyses tables this connection queried that were never
    analysed or have grown 25-fold since; ``analysis_limit`` keeps it to
    milliseconds on large tables. No-op elsewhere.
    """
    if not is_sqlite(using):
        return
    with connections[using].cursor() as cursor:
        cursor.execute("PRAGMA analysis_limit = 1000")
        cursor.execute("PRAGMA optimize")


def sqlite_claim(
    *, worker, queues, limit, now, lease_until, ids=None, due_by=None, limits=True, in_flight=(), using="default"
):
    """SQLite: claim up to ``limit`` jobs due by ``due_by`` (default ``now``) in claim order.

    Return the rows (CLAIM_COLUMNS). One statement is atomic on SQLite; the
    status check in the outer WHERE repeats the compare-and-set. With
    ``limits`` no paused or limited queue is claimed from (limited queues
    have a claim of their own, ``sql.limited``); without, both are (the test
    helpers' ``drain``).
    """
    params = [adapt_dt(now if due_by is None else due_by, using)]
    where = ["status = 'pending'", "execute_at <= %s"]
    where.append(_in_list("queue", queues, params, using))
    if limits:
        where.append(NOT_PAUSED_NOR_LIMITED)
    if ids is not None:
        where.append(_in_list("id", ids, params, using))
    # No keyed job (``sql.keys`` claims those) and no expired one.
    where.append(unkeyed_unexpired("%s"))
    params.append(adapt_dt(now, using))
    if in_flight:
        # Never a job this dispatcher still runs (invariant 14).
        where.append(f"NOT {_in_list('id', in_flight, params, using)}")
    params.append(int(limit))
    # SQLite without statistics (nobody runs ANALYZE) chose (status, id) and
    # sorted every pending row per claim: 31 ms with 100,000 due jobs, against
    # 0.07 ms walking the claim index, which is already in claim order.
    hint = " INDEXED BY job_pending_claim_idx" if ids is None else ""
    select = f"SELECT id FROM {TABLE}{hint} WHERE {' AND '.join(where)} ORDER BY priority DESC, execute_at, id LIMIT %s"
    t = adapt_dt(now, using)
    set_params = [worker, adapt_dt(lease_until, using), t, t, t]
    statement = (
        f"UPDATE {TABLE} SET status = 'running', attempts = attempts + 1, worker = %s, "
        "lease_expires_at = %s, started_at = COALESCE(started_at, %s), last_attempted_at = %s, "
        "updated_at = %s, finished_at = NULL "
        f"WHERE status = 'pending' AND id IN ({select}) RETURNING {claim_returning(pg=False)}"
    )
    return _rows(statement, set_params + params, using)


# The status an outcome leaves its job in (``base.ending``: the one rule).
END = ending("v.vstatus", "j.cancel_requested")


def sqlite_finish(rows, *, now, dependents=False, logs=(), using="default"):
    """SQLite: record outcomes of claimed attempts; return ``{id: status it was left in}`` of the rows that matched.

    ``rows`` are tuples ``(id, worker, attempt, status, result_json,
    error_json, execute_at, log count, snoozed)``; each row is compare-and-set on
    ``status = running AND worker AND attempts``, so a finisher whose attempt
    was rescued (and maybe claimed again elsewhere) changes nothing. Without
    ``dependents`` jobs that others depend on are left for
    ``lifecycle.finish`` (see ``postgres.finish_ctes``). The log records
    ``logs`` of the outcomes that won are inserted in the same transaction
    (a few multi-row INSERTs, never one per record).
    """
    params = []
    values = []
    for job_id, worker, attempt, status, result, error, execute_at, count, snoozed in rows:
        values.append("(%s, %s, %s, %s, %s, %s, %s, %s, %s)")
        params.extend(
            [job_id, worker, attempt, status, result, error, adapt_dt(execute_at, using), count, int(snoozed)]
        )
    statement = (
        f"WITH v(vid, vworker, vattempts, vstatus, vresult, verror, vexec, vlogs, vsnooze) AS "
        f"(VALUES {', '.join(values)}) "
        f"UPDATE {TABLE} AS j SET "
        f"status = {END}, "
        "result = CASE WHEN v.vstatus = 'succeeded' THEN v.vresult ELSE j.result END, "
        "errors = CASE WHEN v.verror IS NULL THEN j.errors "
        "ELSE json_insert(j.errors, '$[#]', json(v.verror)) END, "
        f"execute_at = CASE WHEN v.vexec IS NOT NULL AND {END} = 'pending' THEN v.vexec ELSE j.execute_at END, "
        f"finished_at = CASE WHEN {END} = 'pending' THEN NULL ELSE %s END, "
        "attempts = j.attempts - v.vsnooze, snoozes = j.snoozes + v.vsnooze, "
        "lease_expires_at = NULL, updated_at = %s, logs_count = j.logs_count + v.vlogs "
        "FROM v WHERE j.id = v.vid AND j.attempts = v.vattempts "
        f"AND j.status = 'running' AND j.worker = v.vworker {'' if dependents else 'AND NOT j.has_dependents '}"
        "RETURNING id, status"
    )
    if not logs:
        return dict(_rows(statement, params + [adapt_dt(now, using)] * 2, using))
    with transaction.atomic(using=using):
        won = dict(_rows(statement, params + [adapt_dt(now, using)] * 2, using))
        _insert_logs([row for row in logs if row[0] in won], using)
    return won


# Rows per INSERT: 8 parameters each, well under SQLite's 32,766.
LOG_BATCH = 1000


def _insert_logs(logs, using):
    with connections[using].cursor() as cursor:
        for start in range(0, len(logs), LOG_BATCH):
            batch = logs[start : start + LOG_BATCH]
            params = []
            for job, attempt, seq, moment, level, name, message, exc in batch:
                params.extend([job, attempt, seq, _sqlite_time(moment), level, name, message, exc])
            cursor.execute(
                f"INSERT INTO {LOG_TABLE} (job_id, attempt, seq, time, level, logger, message, exc_text) "
                f"VALUES {', '.join(['(%s, %s, %s, %s, %s, %s, %s, %s)'] * len(batch))}",
                params,
            )


def _sqlite_time(epoch):
    # Django's SQLite text for an aware UTC time: 'YYYY-MM-DD HH:MM:SS.ffffff'.
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
