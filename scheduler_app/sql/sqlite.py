"""SQLite: the claim, the claim of limited queues, the batched finish, and planner statistics."""

from datetime import UTC, datetime, timedelta

from django.db import connections, transaction

from .base import (
    CLAIM_COLUMNS,
    LOG_TABLE,
    NOT_PAUSED_NOR_LIMITED,
    QUEUE_TABLE,
    SQLITE_EPOCH,
    START_TABLE,
    TABLE,
    _in_list,
    _rows,
    adapt_dt,
    claim_by,
    claim_order,
    ending,
    is_sqlite,
    status_in,
    unexpired,
    unkeyed_unexpired,
)
from .limited import LIMITED, RATE_START_KEEP


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
    have a claim of their own, ``sql.limited``), and no job with a
    concurrency key (``sql.keys``); without, all of them are (the test
    helpers' ``drain``).
    """
    params = [adapt_dt(now if due_by is None else due_by, using)]
    where = [status_in("claim"), "execute_at <= %s"]
    where.append(_in_list("queue", queues, params, using))
    if limits:
        where.append(NOT_PAUSED_NOR_LIMITED)
    if ids is not None:
        where.append(_in_list("id", ids, params, using))
    # No expired job, and with limits no keyed one (``sql.keys`` claims those).
    where.append(unkeyed_unexpired("%s") if limits else unexpired("%s"))
    params.append(adapt_dt(now, using))
    if in_flight:
        # Never a job this dispatcher still runs (invariant 14).
        where.append(f"NOT {_in_list('id', in_flight, params, using)}")
    params.append(int(limit))
    # SQLite without statistics (nobody runs ANALYZE) chooses (status, id) and
    # sorts every pending row per claim; the claim index is already in claim order.
    hint = " INDEXED BY job_pending_claim_idx" if ids is None else ""
    select = f"SELECT id FROM {TABLE}{hint} WHERE {' AND '.join(where)} ORDER BY {claim_order()} LIMIT %s"
    statement, set_params = claim_by(
        f"id IN ({select})", worker=worker, lease_until=lease_until, now=now, pg=False, using=using
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


def sqlite_limited_claim(*, worker, queues, limit, now, lease_until, in_flight=(), using="default"):
    """SQLite: claim up to ``limit`` due jobs of ``queues`` within their limits; return ``(claimed rows, room rows)``.

    One transaction (SQLite's writers take turns, so what it counts is what
    every committed claim left): read the room of each limited queue, claim,
    write the starts of rate-limited queues and drop those past their window.
    """
    t = adapt_dt(now, using)
    with transaction.atomic(using=using):
        rooms = _sqlite_rooms(queues, t, using)
        select_params = []
        parts = []
        due = adapt_dt(now, using)
        # Never a job this dispatcher still runs (invariant 14).
        skip = f"AND id NOT IN ({', '.join(['%s'] * len(in_flight))}) " if in_flight else ""
        # No keyed job (``sql.keys`` claims those) and no expired one.
        skip = f"AND {unkeyed_unexpired('%s')} {skip}"
        skipped = [t, *in_flight]
        others = sorted(set(queues) - {name for name, *_ in rooms})
        if others:
            free = []
            free_in = _in_list("queue", others, free, using)
            parts.append(
                f"SELECT * FROM (SELECT id, priority, execute_at FROM {TABLE} INDEXED BY job_pending_claim_idx "
                f"WHERE status = 'pending' AND execute_at <= %s AND {free_in} AND {NOT_PAUSED_NOR_LIMITED} {skip}"
                f"ORDER BY {claim_order()} LIMIT %s)"
            )
            select_params += [due, *free, *skipped, int(limit)]
        for name, _, by_concurrency, by_rate, _ in rooms:
            room = min(v for v in (by_concurrency, by_rate, limit) if v is not None)
            if room <= 0:
                continue
            parts.append(
                # No per-queue index on SQLite (see migration 0008): the claim index, in claim order.
                f"SELECT * FROM (SELECT id, priority, execute_at FROM {TABLE} INDEXED BY job_pending_claim_idx "
                f"WHERE status = 'pending' AND queue = %s AND execute_at <= %s {skip}"
                f"ORDER BY {claim_order()} LIMIT %s)"
            )
            select_params += [name, due, *skipped, int(room)]
        if not parts:
            return [], [(name, oldest, c, r, p) for name, oldest, c, r, p in rooms]
        chosen = f"SELECT id FROM ({' UNION ALL '.join(parts)}) ORDER BY {claim_order()} LIMIT %s"
        statement, set_params = claim_by(
            f"id IN ({chosen})", worker=worker, lease_until=lease_until, now=now, pg=False, using=using
        )
        claimed = _rows(statement, [*set_params, *select_params, int(limit)], using)
        _sqlite_record_starts(claimed, rooms, now, t, using)
    return claimed, [(name, oldest, c, r, p) for name, oldest, c, r, p in rooms]


def _sqlite_rooms(queues, t, using):
    """Return ``(name, oldest start, room by concurrency, room by rate, rate_period)`` of each limited queue."""
    params = []
    names = _in_list("name", queues, params, using)
    epoch = SQLITE_EPOCH.replace("%(expressions)s", "min(s.started_at)").replace("%%%%", "%%")
    # strftime's %f rounds to the millisecond: a bound rounded up would miss a
    # start just inside the window and let one start too many through. The
    # count takes a millisecond more than the window (it may count a start
    # that just left it, never miss one); the DELETE below keeps a start
    # RATE_START_KEEP seconds past the window.
    starts = (
        f"FROM {START_TABLE} s WHERE s.queue = q.name AND s.started_at > "
        "strftime('%%Y-%%m-%%d %%H:%%M:%%f', %s, '-' || (q.rate_period + 0.001) || ' seconds')"
    )
    return _rows(
        f"SELECT q.name, "
        f"CASE WHEN q.rate_limit IS NULL THEN NULL ELSE (SELECT {epoch} {starts}) END, "
        f"q.concurrency_limit - (SELECT count(*) FROM {TABLE} r WHERE r.status = 'running' AND r.queue = q.name), "
        f"q.rate_limit - (SELECT count(*) {starts}), q.rate_period "
        f"FROM {QUEUE_TABLE} q WHERE {names} AND NOT q.paused AND {LIMITED}",
        [t, t, *params],
        using,
    )


def _sqlite_record_starts(claimed, rooms, now, t, using):
    """Write a start for each claimed job of a rate-limited queue; drop the starts past their window."""
    rated = {name for name, _, _, by_rate, _ in rooms if by_rate is not None}
    queue_at = CLAIM_COLUMNS.index("queue")
    started = [row[queue_at] for row in claimed if row[queue_at] in rated]
    if started:
        values = ", ".join(["(%s, %s)"] * len(started))
        _rows(
            f"INSERT INTO {START_TABLE} (queue, started_at) VALUES {values} RETURNING id",
            [v for name in started for v in (name, t)],
            using,
        )
    for name, _, _, _, period in rooms:
        if name in rated:
            _rows(
                f"DELETE FROM {START_TABLE} WHERE queue = %s AND started_at <= %s RETURNING id",
                [name, adapt_dt(now - timedelta(seconds=period + RATE_START_KEEP), using)],
                using,
            )
