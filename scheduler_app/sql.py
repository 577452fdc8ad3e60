"""The dialect layer: raw SQL for the dispatcher's hot transitions, and every vendor check.

Everything that differs between PostgreSQL and SQLite lives here: SKIP
LOCKED, array parameters, JSON append, NOTIFY, the planner's estimates.
Each transition function runs one statement and returns its rows; the
lifecycle service (``scheduler_app.lifecycle``) decides what they mean.

On PostgreSQL there is one statement for finishing and claiming
(:func:`pg_finish_and_claim`), run by the dispatcher on its own connection
as a prepared statement and by everything else on Django's connection.
"""

import contextlib
import json

from django.db import connections, transaction
from django.db.models import FloatField, Func
from django.db.models.sql import InsertQuery

from .dispatcher.policy import LEASE_EXPIRED_CLASS

TABLE = "scheduler_app_job"
QUEUE_TABLE = "scheduler_app_queue"
# Part of every claim's condition (invariant 11): a pause takes effect at its
# commit, not when each dispatcher next reads the flags.
NOT_PAUSED = f"queue NOT IN (SELECT name FROM {QUEUE_TABLE} WHERE paused)"

# What a claim returns, in this order (``lifecycle.transitions`` reads it).
# Times as epoch seconds (see Epoch): any stored time converts. The last
# three are for the attempt's TaskResult (errors: the earlier ones, as text).
CLAIM_COLUMNS = (
    "id", "task", "args", "kwargs", "queue", "priority", "execute_at", "attempts", "max_attempts",
    "timeout", "cancel_requested", "created_at", "started_at", "errors",
)


def claim_returning(alias="", *, pg):
    """Return the RETURNING list of a claim, columns qualified by ``alias``."""
    prefix = f"{alias}." if alias else ""
    columns = []
    for column in CLAIM_COLUMNS:
        if column in ("execute_at", "created_at", "started_at"):
            template = "EXTRACT(EPOCH FROM {c})::float8" if pg else SQLITE_EPOCH.replace("%(expressions)s", "{c}")
            columns.append(template.format(c=prefix + column).replace("%%%%", "%%"))
        elif column == "errors" and pg:
            # As text: parsed on a worker thread, and only if a TaskResult is built.
            columns.append(f"{prefix}errors::text")
        else:
            columns.append(prefix + column)
    return ", ".join(columns)


def vendor(using="default"):
    return connections[using].vendor


def is_postgres(using="default"):
    return vendor(using) == "postgresql"


def is_sqlite(using="default"):
    return vendor(using) == "sqlite"


class Epoch(Func):
    """A timestamp column as epoch seconds, computed by the database.

    The dispatcher reads times this way: a float never fails to convert,
    where a datetime does for any stored time Python cannot represent (a
    row written around the service in the year 10000, or BC). SQLite's
    text is parsed to the microsecond; unparseable text is NULL.
    """

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)::float8", **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template=SQLITE_EPOCH, **extra)


# Django stores SQLite datetimes as UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]':
# whole seconds from strftime, the fraction from the text itself.
SQLITE_EPOCH = (
    "(CAST(strftime('%%%%s', %(expressions)s) AS REAL) "
    "+ COALESCE(CAST(NULLIF(substr(%(expressions)s, 20), '') AS REAL), 0.0))"
)


def _rows(statement, params, using):
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def notify(channel, payload, using="default"):
    """Queue a NOTIFY in the current transaction (PostgreSQL; a no-op elsewhere)."""
    if is_postgres(using):
        _rows("SELECT pg_notify(%s, %s)", [channel, payload], using)


def adapt_dt(value, using="default"):
    """Return a datetime as the database driver wants it in raw SQL."""
    if value is None:
        return None
    return connections[using].ops.adapt_datetimefield_value(value)


def _in_list(column, values, params, using):
    """Return ``column IN (...)`` (SQLite) or ``column = ANY(%s)`` (PostgreSQL)."""
    values = list(values)
    if is_postgres(using):
        params.append(values)
        return f"{column} = ANY(%s)"
    if not values:
        return "0 = 1"
    params.extend(values)
    return f"{column} IN ({', '.join(['%s'] * len(values))})"


def pg_insert_and_notify(obj, *, channel, payload_parts, using="default"):
    """Insert ``obj`` and send the NOTIFY that announces it, in one statement; return the new id.

    The INSERT is compiled by Django (field preparation as ``save()`` does
    it); a data-modifying CTE returns the new id and passes it to
    ``pg_notify`` as ``payload_parts[0] || id || payload_parts[1]``. Run
    outside a transaction it is one round trip and one commit, atomic like
    any single statement; the NOTIFY is delivered when it commits. Inside
    the caller's transaction it runs in a savepoint, as
    ``transaction.atomic`` would, so a failed insert leaves that transaction
    usable.
    """
    statement, params = pg_insert_statement(obj, channel=channel, payload_parts=payload_parts, using=using)
    connection = connections[using]
    savepoint = transaction.atomic(using=using) if connection.in_atomic_block else contextlib.nullcontext()
    with savepoint, connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0]


def pg_insert_statement(obj, *, channel, payload_parts, using="default"):
    """Return ``(statement, params)`` of :func:`pg_insert_and_notify`."""
    meta = obj._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
    key = (type(obj), using)
    statement = _INSERT_STATEMENTS.get(key)
    if statement is None:
        query = InsertQuery(type(obj))
        query.insert_values(fields, [obj])
        compiler = query.get_compiler(using=using)
        compiler.returning_fields = [meta.pk]
        [(insert, params)] = compiler.as_sql()
        statement = (
            f"WITH ins AS ({insert}) "
            "SELECT ins.id, pg_notify(%s, %s || ins.id::text || %s) FROM ins"
        )
        if len(params) == len(fields):  # one placeholder per field: the text can be reused
            _INSERT_STATEMENTS[key] = statement
    else:
        # The compiler's per-field preparation without compiling the text again
        # (a third of the enqueue's Python time).
        connection = connections[using]
        params = [f.get_db_prep_save(f.pre_save(obj, True), connection=connection) for f in fields]
    return statement, [*params, channel, *payload_parts]


# (model, database alias) -> the INSERT ... pg_notify statement: its text
# depends only on the model's fields.
_INSERT_STATEMENTS = {}


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


def sqlite_claim(*, worker, queues, limit, now, lease_until, ids=None, using="default"):
    """SQLite: claim up to ``limit`` due jobs in claim order; return the rows (CLAIM_COLUMNS).

    One statement is atomic on SQLite; the status check in the outer WHERE
    repeats the compare-and-set.
    """
    params = [adapt_dt(now, using)]
    where = ["status = 'pending'", "execute_at <= %s"]
    where.append(_in_list("queue", queues, params, using))
    where.append(NOT_PAUSED)
    if ids is not None:
        where.append(_in_list("id", ids, params, using))
    params.append(int(limit))
    # SQLite without statistics (nobody runs ANALYZE) chose (status, id) and
    # sorted every pending row per claim: 31 ms with 100,000 due jobs, against
    # 0.07 ms walking the claim index, which is already in claim order.
    hint = " INDEXED BY job_pending_claim_idx" if ids is None else ""
    select = (
        f"SELECT id FROM {TABLE}{hint} WHERE {' AND '.join(where)} "
        "ORDER BY priority DESC, execute_at, id LIMIT %s"
    )
    t = adapt_dt(now, using)
    set_params = [worker, adapt_dt(lease_until, using), t, t, t]
    statement = (
        f"UPDATE {TABLE} SET status = 'running', attempts = attempts + 1, worker = %s, "
        "lease_expires_at = %s, started_at = COALESCE(started_at, %s), last_attempted_at = %s, "
        "updated_at = %s, finished_at = NULL "
        f"WHERE status = 'pending' AND id IN ({select}) RETURNING {claim_returning(pg=False)}"
    )
    return _rows(statement, set_params + params, using)


def sqlite_finish(rows, *, now, using="default"):
    """SQLite: record outcomes of claimed attempts; return the ids whose row matched.

    ``rows`` are tuples ``(id, worker, attempt, status, result_json,
    error_json, execute_at)``; each row is compare-and-set on
    ``status = running AND worker AND attempts``, so a finisher whose attempt
    was rescued (and maybe claimed again elsewhere) changes nothing.
    """
    params = []
    values = []
    for job_id, worker, attempt, status, result, error, execute_at in rows:
        values.append("(%s, %s, %s, %s, %s, %s, %s)")
        params.extend([job_id, worker, attempt, status, result, error, adapt_dt(execute_at, using)])
    statement = (
        f"WITH v(vid, vworker, vattempts, vstatus, vresult, verror, vexec) AS "
        f"(VALUES {', '.join(values)}) "
        f"UPDATE {TABLE} AS j SET "
        "status = v.vstatus, "
        "result = CASE WHEN v.vstatus = 'succeeded' THEN v.vresult ELSE j.result END, "
        "errors = CASE WHEN v.verror IS NULL THEN j.errors "
        "ELSE json_insert(j.errors, '$[#]', json(v.verror)) END, "
        "execute_at = CASE WHEN v.vexec IS NULL THEN j.execute_at ELSE v.vexec END, "
        "finished_at = CASE WHEN v.vstatus = 'pending' THEN NULL ELSE %s END, "
        "cancel_requested = CASE WHEN v.vstatus = 'pending' THEN 0 ELSE j.cancel_requested END, "
        "lease_expires_at = NULL, updated_at = %s "
        "FROM v WHERE j.id = v.vid AND j.attempts = v.vattempts "
        "AND j.status = 'running' AND j.worker = v.vworker RETURNING id"
    )
    return {r[0] for r in _rows(statement, params + [adapt_dt(now, using)] * 2, using)}


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
    longer matches.
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
            f"RETURNING j.id, j.status, j.queue"
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
            f"RETURNING id, status, queue"
        )
        params = [time_text, message, t, t, t, t, t, int(limit)]
    return [tuple(r) for r in _rows(statement, params, using)]


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


def _pg_finish_and_claim_text(by_ids, limit):
    """Build the PostgreSQL statement that records outcomes and claims jobs at once.

    Its text depends only on the claim's kind and ``limit`` (arrays, not
    VALUES lists), so the loop's connection prepares one statement per
    (kind, limit) and, with ``plan_cache_mode = force_generic_plan``, plans
    each once: planning this statement cost more than running it. The plan
    must then be right for any parameters: rows are found by primary key
    (``id = ANY(...)``), never by joining on an estimate; the limit is a
    literal so the planner knows how many rows come out of ``c``.
    Data-modifying CTEs run on one snapshot: ``f`` touches this worker's
    running rows, ``u`` only pending ones, so they never meet. With limit 0
    it only finishes.
    """
    id_filter = "AND id = ANY(%(ids)s::bigint[]) " if by_ids else ""
    # By ids the caller asks for exactly the rows it names (and orders what
    # comes back), so no sort; by query the claim index gives claim order.
    order = "" if by_ids else "ORDER BY priority DESC, execute_at, id "
    returning = claim_returning("j", pg=True)
    columns = len(CLAIM_COLUMNS)
    return (
        "WITH v AS (SELECT * FROM jsonb_to_recordset(%(finished)s::jsonb) "
        "AS v(vid bigint, vworker text, vattempts integer, vstatus text, vresult text, "
        "verror text, vexec timestamptz)), "
        f"f AS (UPDATE {TABLE} AS j SET "
        "status = v.vstatus, "
        "result = CASE WHEN v.vstatus = 'succeeded' THEN v.vresult::jsonb ELSE j.result END, "
        "errors = CASE WHEN v.verror IS NULL THEN j.errors "
        "ELSE j.errors || jsonb_build_array(v.verror::jsonb) END, "
        "execute_at = COALESCE(v.vexec, j.execute_at), "
        "finished_at = CASE WHEN v.vstatus = 'pending' THEN NULL ELSE %(now)s END, "
        "cancel_requested = CASE WHEN v.vstatus = 'pending' THEN FALSE ELSE j.cancel_requested END, "
        "lease_expires_at = NULL, updated_at = %(now)s "
        "FROM v WHERE j.id = v.vid AND j.id = ANY(ARRAY(SELECT vid FROM v)) "
        "AND j.attempts = v.vattempts AND j.status = 'running' AND j.worker = v.vworker RETURNING j.id), "
        f"c AS (SELECT id FROM {TABLE} WHERE status = 'pending' AND execute_at <= %(now)s "
        f"AND queue = ANY(%(queues)s::text[]) AND {NOT_PAUSED} {id_filter}"
        f"{order}LIMIT {int(limit)} FOR UPDATE SKIP LOCKED), "
        f"u AS (UPDATE {TABLE} AS j SET status = 'running', attempts = j.attempts + 1, "
        "worker = %(worker)s, lease_expires_at = %(lease)s, "
        "started_at = COALESCE(j.started_at, %(now)s), last_attempted_at = %(now)s, "
        "updated_at = %(now)s, finished_at = NULL "
        f"WHERE j.id = ANY(ARRAY(SELECT id FROM c)) RETURNING {returning}) "
        f"SELECT NULL::bigint AS finished, * FROM u "
        f"UNION ALL SELECT f.id, {', '.join(['NULL'] * columns)} FROM f"
    )


_PG_FINISH_AND_CLAIM = {}


def pg_finish_and_claim_text(by_ids, limit):
    """The finish+claim statement for a claim by ids (or by query) of up to ``limit`` rows."""
    key = (bool(by_ids), int(limit))
    statement = _PG_FINISH_AND_CLAIM.get(key)
    if statement is None:
        statement = _PG_FINISH_AND_CLAIM[key] = _pg_finish_and_claim_text(*key)
    return statement


def _pg_array(values):
    """A PostgreSQL array literal: one text parameter, cheaper to send than a list."""
    quoted = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


def pg_finish_and_claim_params(rows, *, worker, queues, now, lease_until, ids):
    """Return the parameters of the finish+claim statement for finish ``rows``.

    The outcomes travel as one JSON document and the id and queue lists as
    array literals: psycopg adapts a Python list element by element, which
    cost more than the statement's planning does now.
    """
    finished = [
        {
            "vid": job_id,
            "vworker": worker_id,
            "vattempts": attempt,
            "vstatus": status,
            "vresult": result,
            "verror": error,
            "vexec": execute_at.isoformat() if execute_at is not None else None,
        }
        for job_id, worker_id, attempt, status, result, error, execute_at in rows
    ]
    return {
        "finished": json.dumps(finished),
        "now": now,
        "queues": _pg_array(queues),
        "ids": _pg_array(ids) if ids is not None else None,
        "worker": worker,
        "lease": lease_until,
    }


def pg_finish_and_claim(rows, *, worker, queues, limit, now, lease_until, ids=None, connection=None, using="default"):
    """PostgreSQL: record outcomes ``rows`` and claim up to ``limit`` jobs, in one statement.

    Return ``(ids of the outcomes that matched, claimed rows)``. On
    ``connection`` (a psycopg connection of the caller's, the dispatcher's
    own) it runs as a prepared statement; without one, on Django's
    connection ``using``. The same text either way.
    """
    statement = pg_finish_and_claim_text(ids is not None, limit)
    params = pg_finish_and_claim_params(
        rows, worker=worker, queues=queues, now=now, lease_until=lease_until, ids=ids
    )
    if connection is not None:
        with connection.cursor() as cursor:
            cursor.execute(statement, params, prepare=True)
            result = cursor.fetchall()
    else:
        result = _rows(statement, params, using)
    won = {r[0] for r in result if r[0] is not None}
    return won, [r[1:] for r in result if r[0] is None]


def estimated_rows(queryset):
    """Return PostgreSQL's row estimate for ``queryset`` (None elsewhere, or when unreadable)."""
    if not is_postgres(queryset.db):
        return None
    try:
        plan = json.loads(queryset.order_by().values("pk").explain(format="json"))
        return int(plan[0]["Plan"]["Plan Rows"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def estimated_value_counts(model, column, values, *, min_rows, using="default"):
    """Return ``{value: estimated rows}`` from PostgreSQL's statistics, or None.

    None on other databases, below ``min_rows`` rows (count exactly then),
    and before the table was analysed.
    """
    if not is_postgres(using):
        return None
    table = model._meta.db_table
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [table])
        row = cursor.fetchone()
        if not row or row[0] < min_rows:
            return None
        total = row[0]
        cursor.execute(
            "SELECT most_common_vals::text::text[], most_common_freqs FROM pg_stats "
            "WHERE tablename = %s AND attname = %s",
            [table, column],
        )
        stats = cursor.fetchone()
    if not stats or not stats[0]:
        return None
    freqs = dict(zip(stats[0], stats[1], strict=False))
    return {v: int(total * freqs.get(v, 0.0)) for v in values}
