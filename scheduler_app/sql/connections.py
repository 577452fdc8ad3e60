"""Direct psycopg connections for the dispatcher's own PostgreSQL sessions (LISTEN, the hot path).

psycopg is optional (the ``postgres`` extra): on SQLite nothing here is used.
"""

from django.db import connections

try:
    import psycopg
except ImportError:  # a SQLite-only installation
    psycopg = None

# psycopg's errors that mean "the connection is gone": the loop retries.
TRANSIENT_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError) if psycopg else ()

# Connection parameters that only Django's wrapper understands.
_DJANGO_ONLY = ("cursor_factory", "context", "prepare_threshold", "pool", "server_side_binding")


def connect(using="default", **options):
    """Open an autocommit psycopg connection to Django's database ``using``."""
    params = connections[using].get_connection_params()
    params = {k: v for k, v in params.items() if k not in _DJANGO_ONLY}
    return psycopg.connect(**params, autocommit=True, **options)


def hot(using="default", *, synchronous_commit=True):
    """Return a new connection for the dispatcher's claims and finishes, set up for their prepared statements."""
    connection = connect(using)
    # Its only prepared statements are sql.pg_finish_and_claim's
    # (and sql.limited's), written to be planned once: planning them takes longer than
    # running them.
    connection.execute("SET plan_cache_mode = force_generic_plan")
    # ... and from the statistics of the moment it was planned: with
    # none yet (a fresh table, a sudden backlog) the planner chooses a
    # bitmap scan + sort of every due row for the claim by query, until
    # autovacuum analyses the table. Without sorts and bitmap scans the only plans left walk
    # the claim index in order and reach rows by primary key.
    connection.execute("SET enable_sort = off")
    connection.execute("SET enable_bitmapscan = off")
    # Nor sequential scans: planned on an empty table, the claim by id
    # scans the whole backlog that arrived after, until an ANALYZE. Its statements reach rows
    # by their ids or walk the claim index; their status tests are
    # written so that no index serves them (sql.postgres.STATUS_AS_FILTER).
    connection.execute("SET enable_seqscan = off")
    # The claim of limited queues must sort (the best of two sets); a
    # disabled sort's cost pushed its estimate past jit_above_cost
    # and each claim spent 0.9 s compiling it. JIT never pays off on
    # statements of a few rows.
    connection.execute("SET jit = off")
    # One statement per (kind, limit): at most 2 x the largest slot
    # group, so keep them all rather than evict and re-plan.
    connection.prepared_max = None
    if not synchronous_commit:
        connection.execute("SET synchronous_commit = off")
    return connection


def raw_cursor(connection):
    """Return a cursor of ``connection`` for statements written with PostgreSQL's own ``$n`` placeholders."""
    return psycopg.RawCursor(connection)
