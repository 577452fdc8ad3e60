"""PostgreSQL: the one-statement enqueue (INSERT + NOTIFY) and the one finish+claim statement.

The enqueue statement is a server-side prepared statement of the session:
the first enqueue on a connection sends ``PREPARE`` in the same query, later
ones ``EXECUTE`` (planning an INSERT into a table with fifteen indexes costs
the server about as much as running it). Django turns psycopg's own prepared
statements off by default for connection poolers; this one statement keeps
working behind them: where the session lacks it (a pooler in transaction
mode, ``DISCARD ALL``) or already has it (an earlier client of a pooled
session) that enqueue sends the plain statement instead (inside the
savepoint, so the caller's transaction is untouched); a session that lacked
it twice gets only plain statements. ``OPTIONS: {"prepare_threshold": None}``
set explicitly in the database's settings also means plain statements
(Django's default, the key absent, does not).
"""

import contextlib
import json
import threading
import weakref
import zlib

from django.db import DatabaseError, connections, transaction
from django.db.models.sql import InsertQuery

from .base import (
    CLAIM_COLUMNS,
    LOG_TABLE,
    NOT_PAUSED_NOR_LIMITED,
    TABLE,
    _rows,
    claim_order,
    claim_returning,
    claim_set,
    ending,
    status_in,
    unexpired,
    unkeyed_unexpired,
)
from .bulk import json_insert, rows_document


def pg_insert_and_notify(obj, *, channel, payload_parts, using="default"):
    """Insert ``obj`` and send the NOTIFY that announces it, in one statement; return the new id.

    The INSERT is ``bulk.json_insert``'s (one JSON document of the row's
    values); a data-modifying CTE returns the new id and passes it to
    ``pg_notify`` as ``payload_parts[0] || id || payload_parts[1]``. Outside
    a transaction it is one round trip and one commit; inside the caller's
    it runs in a savepoint (``SAVEPOINT; ...; RELEASE`` as one query), so a
    failed insert leaves that transaction usable. The statement is prepared
    once per database session, and keeps working behind poolers: see
    ``_PREPARED`` (module docstring).
    """
    statement, params, types = pg_insert_statement(obj, channel=channel, payload_parts=payload_parts, using=using)
    connection = connections[using]
    options = connection.settings_dict.get("OPTIONS", {})
    if options.get("server_side_binding"):
        # psycopg binds (and prepares) server-side itself, one statement per
        # query: the savepoint apart, as transaction.atomic does it.
        atomic = transaction.atomic(using=using) if connection.in_atomic_block else contextlib.nullcontext()
        with atomic, connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchone()[0]
    with connection.cursor() as cursor:
        prepared = None
        if types is not None and options.get("prepare_threshold", 0) is not None:
            prepared = _PREPARED.get(connection.connection, statement, types)
        if prepared is None:
            return _execute(connection, cursor, statement, params)
        name, prepare = prepared
        call = f"EXECUTE {name}({', '.join(['%s'] * len(params))})"
        try:
            if prepare:
                pk = _execute(connection, cursor, call, params, prepare=prepare)
                _PREPARED.done(connection.connection, name)
                return pk
            return _execute(connection, cursor, call, params)
        except DatabaseError as exc:
            state = getattr(exc.__cause__, "sqlstate", None)
            if state == _ALREADY_PREPARED:  # by an earlier client of this server session: same name, same text
                _PREPARED.done(connection.connection, name)
            elif state == _NOT_PREPARED:
                _PREPARED.missed(connection.connection, name)
            else:
                raise
            return _execute(connection, cursor, statement, params)


def _execute(connection, cursor, statement, params, *, prepare=""):
    """Run the enqueue statement, after ``prepare``; return the new id.

    Inside the caller's transaction all of it runs in a savepoint.
    """
    if not connection.in_atomic_block:
        cursor.execute(f"{prepare}; {statement}" if prepare else statement, params)
    else:
        try:
            before = f"{prepare}; " if prepare else ""
            cursor.execute(f"SAVEPOINT {_SAVEPOINT}; {before}{statement}; RELEASE SAVEPOINT {_SAVEPOINT}", params)
        except Exception:
            with contextlib.suppress(Exception):
                cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}; RELEASE SAVEPOINT {_SAVEPOINT}")
            raise
        cursor.nextset()  # past the SAVEPOINT's (empty) result
    if prepare:
        cursor.nextset()  # past the PREPARE's
    return cursor.fetchone()[0]


_SAVEPOINT = "scheduler_enqueue"
_NOT_PREPARED = "26000"  # invalid_sql_statement_name: "prepared statement ... does not exist"
_ALREADY_PREPARED = "42P05"  # duplicate_prepared_statement


class _Prepared:
    """Which database sessions have the enqueue statement prepared, by psycopg connection."""

    MISSES = 2  # a session that missed this often gets plain statements

    def __init__(self):
        self.sessions = weakref.WeakKeyDictionary()  # psycopg connection -> {name: True, "missed": n}
        self.lock = threading.Lock()

    def get(self, raw, statement, types):
        """Return ``(name, "PREPARE ..." or "" if the session has it)``, or None: send the plain statement."""
        if raw is None:
            return None
        name = f"scheduler_enqueue_{zlib.crc32(statement.encode()):08x}"
        with self.lock:
            session = self.sessions.setdefault(raw, {})
        if name in session:
            return name, ""
        if session.get("missed", 0) >= self.MISSES:
            return None
        numbered = statement
        for number in range(1, len(types) + 1):
            numbered = numbered.replace("%s", f"${number}", 1)
        return name, f"PREPARE {name}({', '.join(types)}) AS {numbered}"

    def done(self, raw, name):
        self.sessions.get(raw, {})[name] = True

    def missed(self, raw, name):
        session = self.sessions.get(raw, {})
        session.pop(name, None)
        session["missed"] = session.get("missed", 0) + 1


_PREPARED = _Prepared()


def pg_insert_statement(obj, *, channel, payload_parts, using="default"):
    """Return ``(statement, params, types)`` of :func:`pg_insert_and_notify`.

    The INSERT is ``bulk.json_insert``'s with a document of one row (four
    parameters of the SQL ``types``, where thirty fields prepared and quoted
    one by one cost more Python than the statement); a value without a JSON
    form takes the ORM's compiled INSERT instead (``types`` None: never
    prepared).
    """
    prepared = json_insert(type(obj), using)
    if prepared is not None:
        insert, readers = prepared
        document = rows_document([obj], readers)
        if document is not None:
            return _with_notify(insert), [document, channel, *payload_parts], ("json", "text", "text", "text")
    meta = obj._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
    query = InsertQuery(type(obj))
    query.insert_values(fields, [obj])
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = [meta.pk]
    [(insert, params)] = compiler.as_sql()
    return _with_notify(insert), [*params, channel, *payload_parts], None


def _with_notify(insert):
    return f"WITH ins AS ({insert}) SELECT ins.id, pg_notify(%s, %s || ins.id::text || %s) FROM ins"


# A status test no index can serve, for statements that reach their rows by an
# id list. The loop's statements are planned once (generic plans), from the
# statistics of that moment: planned while few jobs ran, a plain
# ``status = 'running'`` is estimated at one row and the finish walks
# ``job_status_id_idx`` (every running job) to find its few ids, where a
# few primary-key lookups would do. ``IS TRUE``
# leaves the test as a filter, so the id list is what finds the rows: by the
# primary key (statistics stale enough to call the table empty can still make
# another ``(column, id)`` index look as cheap, until the next ANALYZE).
STATUS_AS_FILTER = "({alias}status = '{status}') IS TRUE"


# A claim never takes a job its dispatcher still runs (invariant 14): after an
# outage longer than the lease, a rescue may have made one pending again.
NOT_IN_FLIGHT = "id <> ALL(%(in_flight)s::bigint[])"
# No keyed job (``sql.keys`` claims those) and no expired one.
UNKEYED = unkeyed_unexpired("%(now)s")
# Without limits (``testing.drain``): keyed jobs too, their keys not counted.
UNEXPIRED = unexpired("%(now)s")

# The status an outcome leaves its job in: its own, unless a cancel was
# requested (``ending``: the one rule, ``vocabulary.jobs.attempt_end``).
END = ending("v.vstatus", "j.cancel_requested")


def finish_ctes(*, dependents=False, logs=False):
    """Return the CTEs ``v`` (the outcomes) and ``f`` (their compare-and-set UPDATE), comma-terminated.

    A snooze gives its attempt back (``attempts - 1``) and counts in
    ``snoozes``. Without ``dependents``, a job that others depend on is
    left alone (it is not in ``f``'s RETURNING): its finish must also
    settle its dependents, which only a statement of its own in the same
    transaction can see (``lifecycle.finish``). The flag is read on the row
    version the UPDATE locks, so a dependent created meanwhile is never missed.
    With ``logs``, a CTE ``l`` inserts the attempts' log records (one JSON
    document) for the outcomes that won, and ``logs_count`` grows by theirs.
    """
    return (
        "v AS (SELECT * FROM jsonb_to_recordset(%(finished)s::jsonb) "
        "AS v(vid bigint, vworker text, vattempts integer, vstatus text, vresult text, "
        "verror text, vexec timestamptz, vsnooze boolean, vlogs integer)), "
        f"f AS (UPDATE {TABLE} AS j SET "
        f"status = {END}, "
        "result = CASE WHEN v.vstatus = 'succeeded' THEN v.vresult::jsonb ELSE j.result END, "
        "errors = CASE WHEN v.verror IS NULL THEN j.errors "
        "ELSE j.errors || jsonb_build_array(v.verror::jsonb) END, "
        f"execute_at = CASE WHEN {END} = 'pending' THEN COALESCE(v.vexec, j.execute_at) ELSE j.execute_at END, "
        f"finished_at = CASE WHEN {END} = 'pending' THEN NULL ELSE %(now)s END, "
        "attempts = CASE WHEN v.vsnooze THEN j.attempts - 1 ELSE j.attempts END, "
        "snoozes = CASE WHEN v.vsnooze THEN j.snoozes + 1 ELSE j.snoozes END, "
        "lease_expires_at = NULL, updated_at = %(now)s, logs_count = j.logs_count + v.vlogs "
        "FROM v WHERE j.id = v.vid AND j.id = ANY(ARRAY(SELECT vid FROM v)) "
        f"AND j.attempts = v.vattempts AND {STATUS_AS_FILTER.format(status='running', alias='j.')} AND j.worker = v.vworker "
        f"{'' if dependents else 'AND NOT j.has_dependents '}RETURNING j.id, j.status), "
        f"{LOGS_CTE if logs else ''}"
    )


def claim_update(source, *, pending=False):
    """Return the CTE ``u``: the claim of the ids in CTE ``source`` (pending -> running), comma-less.

    ``pending``: compare-and-set on the status too (the ids were chosen, not locked, by ``source``).
    """
    cas = f" AND {STATUS_AS_FILTER.format(status='pending', alias='j.')}" if pending else ""
    return (
        f"u AS (UPDATE {TABLE} AS j SET {claim_set(worker='%(worker)s', lease='%(lease)s', now='%(now)s', alias='j')} "
        f"WHERE j.id = ANY(ARRAY(SELECT id FROM {source})){cas} RETURNING {claim_returning('j', pg=True)})"
    )


def _pg_finish_and_claim_text(by_ids, limit, limits, dependents=False, logs=False):
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
    it only finishes. With ``limits`` it claims from no paused or limited
    queue (those have a claim of their own, ``sql.limited``) and no job with
    a concurrency key (``sql.keys``); without, from all of them. With ``logs``
    the attempts' log records are inserted too (``finish_ctes``).
    """
    id_filter = "AND id = ANY(%(ids)s::bigint[]) " if by_ids else ""
    # By query the claim index (pending rows, in claim order) is the way in; by
    # ids the primary key is, whatever the statistics said at planning time.
    pending = STATUS_AS_FILTER.format(status="pending", alias="") if by_ids else status_in("claim")
    # By ids the caller asks for exactly the rows it names (and orders what
    # comes back), so no sort; by query the claim index gives claim order.
    order = "" if by_ids else f"ORDER BY {claim_order()} "
    return (
        f"WITH {finish_ctes(dependents=dependents, logs=logs)}"
        f"c AS (SELECT id FROM {TABLE} WHERE {pending} AND execute_at <= %(due)s "
        f"AND queue = ANY(%(queues)s::text[]) {'AND ' + NOT_PAUSED_NOR_LIMITED if limits else ''} {id_filter}"
        f"AND {NOT_IN_FLIGHT} AND {UNKEYED if limits else UNEXPIRED} "
        f"{order}LIMIT {int(limit)} FOR UPDATE SKIP LOCKED), "
        f"{claim_update('c')} "
        f"SELECT NULL::bigint AS finished, * FROM u "
        f"UNION ALL SELECT {finished_row()} FROM f"
    )


def finished_row():
    """The select list of a finished outcome's row in a claim's result: its id, then its status where ``task`` is."""
    columns = ["NULL"] * len(CLAIM_COLUMNS)
    columns[CLAIM_COLUMNS.index("task")] = "f.status"
    return f"f.id, {', '.join(columns)}"


def finished_statuses(result):
    """Return ``{job id: status it was left in}`` of a claim's result rows whose first column is a finished id."""
    at = 1 + CLAIM_COLUMNS.index("task")
    return {r[0]: r[at] for r in result if r[0] is not None and r[0] > 0}


def logs_cte(source):
    """Return the CTE ``l`` (comma-less): insert the log records ``%(logs)s`` (``logs_document``) of the jobs ``source`` returns."""
    return (
        f"l AS (INSERT INTO {LOG_TABLE} (job_id, attempt, seq, time, level, logger, message, exc_text) "
        "SELECT x.job, x.attempt, x.seq, to_timestamp(x.time), x.level, x.logger, x.message, x.exc "
        "FROM json_to_recordset(%(logs)s::json) AS x(job bigint, attempt integer, seq integer, time float8, "
        f"level smallint, logger text, message text, exc text) WHERE x.job IN (SELECT id FROM {source}))"
    )


def logs_document(logs):
    """Return log rows ``(job, attempt, seq, epoch, level, logger, message, exc text)`` as one JSON document."""
    return json.dumps(
        [
            {
                "job": job,
                "attempt": attempt,
                "seq": seq,
                "time": t,
                "level": level,
                "logger": name,
                "message": message,
                "exc": exc,
            }
            for job, attempt, seq, t, level, name, message, exc in logs
        ]
    )


# The attempts' log records, for the outcomes that won (f returns their ids).
LOGS_CTE = f"{logs_cte('f')}, "

_PG_FINISH_AND_CLAIM = {}


def pg_finish_and_claim_text(by_ids, limit, limits=True, dependents=False, logs=False):
    """The finish+claim statement for a claim by ids (or by query) of up to ``limit`` rows.

    Without ``limits`` it claims from paused and limited queues too (the
    test helpers' ``drain``). With ``dependents`` it also finishes jobs that
    others depend on (``lifecycle.finish`` then settles the dependents).
    With ``logs`` it also inserts log records: a text of its own, so that
    batches without any pay nothing for them.
    """
    key = (bool(by_ids), int(limit), bool(limits), bool(dependents), bool(logs))
    statement = _PG_FINISH_AND_CLAIM.get(key)
    if statement is None:
        statement = _PG_FINISH_AND_CLAIM[key] = _pg_finish_and_claim_text(*key)
    return statement


def pg_array(values):
    """A PostgreSQL array literal: one text parameter, cheaper to send than a list."""
    quoted = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


def pg_finish_and_claim_params(rows, *, worker, queues, now, lease_until, ids, due_by=None, logs=(), in_flight=()):
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
            "vlogs": count,
            "vsnooze": snoozed,
        }
        for job_id, worker_id, attempt, status, result, error, execute_at, count, snoozed in rows
    ]
    params = {
        "finished": json.dumps(finished),
        "now": now,
        "due": now if due_by is None else due_by,
        "queues": pg_array(queues),
        "ids": pg_array(ids) if ids is not None else None,
        "in_flight": pg_array(in_flight),
        "worker": worker,
        "lease": lease_until,
    }
    if logs:
        params["logs"] = logs_document(logs)
    return params


def pg_finish_and_claim(
    rows,
    *,
    worker,
    queues,
    limit,
    now,
    lease_until,
    ids=None,
    due_by=None,
    limits=True,
    dependents=False,
    logs=(),
    in_flight=(),
    connection=None,
    using="default",
):
    """PostgreSQL: record outcomes ``rows`` and claim up to ``limit`` jobs, in one statement.

    Return ``({id: status} of the outcomes that matched, claimed rows)``. On
    ``connection`` (a psycopg connection of the caller's, the dispatcher's
    own) it runs as a prepared statement; without one, on Django's
    connection ``using``. The same text either way.
    """
    statement = pg_finish_and_claim_text(ids is not None, limit, limits, dependents, bool(logs))
    params = pg_finish_and_claim_params(
        rows,
        worker=worker,
        queues=queues,
        now=now,
        lease_until=lease_until,
        ids=ids,
        due_by=due_by,
        logs=logs,
        in_flight=in_flight,
    )
    if connection is not None:
        with connection.cursor() as cursor:
            cursor.execute(statement, params, prepare=True)
            result = cursor.fetchall()
    else:
        result = _rows(statement, params, using)
    return finished_statuses(result), [r[1:] for r in result if r[0] is None]
