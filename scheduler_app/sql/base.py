"""What every statement shares: table names, the claim's order, SET list and columns, vendor checks, time as epoch."""

import json

from django.db import connections
from django.db.models import FloatField, Func

from ..vocabulary.jobs import Status
from ..vocabulary.states import sources

TABLE = "scheduler_app_job"
QUEUE_TABLE = "scheduler_app_queue"
LOG_TABLE = "scheduler_app_joblog"
DEPENDENCY_TABLE = "scheduler_app_jobdependency"
START_TABLE = "scheduler_app_queuestart"
UNIQUE_WINDOW_TABLE = "scheduler_app_uniquewindow"
# The plain claim's condition (invariant 11): no paused queue, and no limited
# one either. A pause takes effect at its commit, not when each dispatcher
# next reads the flags.
# Limited queues are claimed only by the claim that counts their use
# (``limited.pg_limited_claim_text``, ``sqlite.sqlite_limited_claim``), so a limit set now
# holds for every claim that starts after its commit.
NOT_PAUSED_NOR_LIMITED = (
    f"queue NOT IN (SELECT name FROM {QUEUE_TABLE} "
    "WHERE paused OR concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)"
)


# What every claim but the keyed one adds (invariant 11): no job with a
# concurrency key (``sql.keys`` claims those, counting their keys' running
# jobs), and no expired job (``expires_at``: a job not started by then never
# starts, whether or not the sweep has ended it yet). ``{now}`` is the claim's
# time as the statement spells its parameter.
def unkeyed_unexpired(now):
    return f"concurrency_key IS NULL AND (expires_at IS NULL OR expires_at > {now})"


def status_in(change, alias=""):
    """Return the SQL test that a row may make ``change`` (``vocabulary.states``): its status is a source of it.

    ``status = 'pending'`` for one status, ``status IN ('pending', 'waiting')``
    for several: the text the partial indexes' predicates are written in.
    """
    names = sources(change)
    if len(names) == 1:
        return f"{alias}status = '{names[0]}'"
    return f"{alias}status IN ({', '.join(f"'{n}'" for n in names)})"


def unexpired(now):
    return f"(expires_at IS NULL OR expires_at > {now})"


def ending(status, cancel="cancel_requested"):
    """Return SQL for the status an attempt ending as ``status`` leaves its job in (``vocabulary.jobs.attempt_end``).

    ``status`` and ``cancel`` are SQL expressions (the ending, the row's
    cancel flag as it is when the statement locks it). Built from
    ``Status.YIELD_TO_CANCEL``, so the SQL and Python forms are one rule.
    """
    yielding = ", ".join(f"'{s}'" for s in Status.YIELD_TO_CANCEL)
    return f"(CASE WHEN {cancel} AND {status} IN ({yielding}) THEN '{Status.CANCELLED}' ELSE {status} END)"


# What a claim returns, in this order (``lifecycle.transitions`` reads it).
# Times as epoch seconds (see Epoch): any stored time converts. The last
# three are for the attempt's TaskResult (errors: the earlier ones, as text).
CLAIM_COLUMNS = (
    "id",
    "task",
    "args",
    "kwargs",
    "queue",
    "priority",
    "execute_at",
    "attempts",
    "max_attempts",
    "timeout",
    "cancel_requested",
    "created_at",
    "started_at",
    "errors",
    "snoozes",
    "backend",
)


def claim_order(alias=""):
    """Return the claim's order (highest priority, then the earliest due, then the oldest), columns qualified by ``alias``.

    Every claim of either database sorts by it, and the claim indexes are
    in it (``job_pending_claim_idx``, ``job_pending_key_claim_idx``).
    """
    prefix = f"{alias}." if alias else ""
    return f"{prefix}priority DESC, {prefix}execute_at, {prefix}id"


def claim_set(*, worker, lease, now, alias=""):
    """Return the SET list of a claim (pending -> running): the attempt, its dispatcher and its lease.

    ``worker``, ``lease`` and ``now`` are SQL (parameters as the statement
    spells them; ``now`` stands three times, in this order after the other
    two); ``alias`` qualifies the columns read from the row.
    """
    prefix = f"{alias}." if alias else ""
    return (
        f"status = '{Status.RUNNING}', attempts = {prefix}attempts + 1, worker = {worker}, "
        f"lease_expires_at = {lease}, started_at = COALESCE({prefix}started_at, {now}), "
        f"last_attempted_at = {now}, updated_at = {now}, finished_at = NULL"
    )


def claim_by(where, *, worker, lease_until, now, pg, using="default"):
    """Return ``(UPDATE, its SET parameters)``: the claim of the pending rows ``where`` (SQL) selects, positional.

    The SET parameters come first; the caller appends those of ``where``.
    It returns ``CLAIM_COLUMNS``.
    """
    t = adapt_dt(now, using)
    statement = (
        f"UPDATE {TABLE} SET {claim_set(worker='%s', lease='%s', now='%s')} "
        f"WHERE status = '{Status.PENDING}' AND {where} RETURNING {claim_returning(pg=pg)}"
    )
    return statement, [worker, adapt_dt(lease_until, using), t, t, t]


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
        elif column in ("args", "kwargs") and pg:
            # As text: most are ``[]`` and ``{}``, which the claim answers
            # without a parse (lifecycle.transitions._load); psycopg's JSON
            # loader parsed every one, a tenth of the loop's time at 16 slots.
            columns.append(f"{prefix}{column}::text")
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
        # As the planner does: rows per page at the last ANALYZE times the
        # pages the table has now, so a table truncated or bulk-deleted since
        # (its statistics still say millions) is counted exactly.
        cursor.execute(
            "SELECT reltuples, relpages, pg_relation_size(oid) / current_setting('block_size')::int "
            "FROM pg_class WHERE oid = %s::regclass",
            [table],
        )
        row = cursor.fetchone()
        if not row or row[0] <= 0 or row[1] <= 0:
            return None
        total = int(row[0] / row[1] * row[2])
        if total < min_rows:
            return None
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
