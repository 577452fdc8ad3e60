"""PostgreSQL, on the dispatcher's own connection: the keyed claim (``sql.keys``) in one statement.

``keys.claim_keyed`` is a transaction of seven round trips (BEGIN, the
outcomes, the queues' turns, the candidates with their keys' locks, the
keys' running jobs, the claim, COMMIT). Here its steps run inside one
statement: a function installed by a migration (``0020_keyed_claim_function``,
a versioned name, so one implementation serves every session, pooled or
not) records the outcomes, then reads the candidates, tries their
keys' locks, counts the running jobs of the keys it locked and chooses,
chunk by chunk, as ``claim_keyed`` does; the statement that calls it claims
the chosen jobs (compare-and-set on ``pending``).

Why it is exact: a VOLATILE function's statements each take a fresh
snapshot (READ COMMITTED), so the count comes after the locks, as the
separate statement's does, and sees the outcomes just recorded; the locks
belong to the statement's transaction and are held until it commits. A job
chosen by the function but committed after the calling statement's snapshot
is not claimed (the claim's UPDATE does not see it): a job fewer, never one
too many. Queues with limits are left to ``claim_keyed`` (the function says
so after recording the outcomes): their turns and counts stay there, and so
does every claim of a database whose migrations have not installed the
function yet.

The choice itself (``keys._Choice.take``) is written twice, in Python for
SQLite and Django's connection and in PL/pgSQL here; ``tests/sql/
test_keyed_statement.py`` holds the two to the same answers, and the
migration's frozen text to :func:`function_text`.
"""

import logging
import threading

from .base import CLAIM_COLUMNS, QUEUE_TABLE, TABLE, claim_order, unexpired
from .keys import CHUNK, CHUNK_GROWTH, KEY_LOCKS, KEY_SCAN, first_chunk
from .limited import LIMITED
from .postgres import claim_update, finish_ctes, pg_finish_and_claim_params

logger = logging.getLogger(__name__)

FUNCTION = "scheduler_keyed_claim_v2"  # a new name when its arguments change

# {finish}: the outcomes' CTEs; {keyed}: the candidates' FROM ... LIMIT; the
# others are names. The chunks grow as ``keys.claim_keyed``'s: the first is
# p_first (``keys.first_chunk``), each next one ``keys.CHUNK_GROWTH`` times the
# last, up to p_chunk.
_BODY = """CREATE OR REPLACE FUNCTION {function}(
    p_finished jsonb, p_logs json, p_now timestamptz, p_queues text[], p_limit integer, p_in_flight bigint[],
    p_first integer, p_chunk integer, p_scan integer
) RETURNS TABLE (kind text, job bigint, status text) LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
    v_chosen bigint[] := '{{}}';
    v_skip text[] := '{{}}';  -- keys found full or busy: left out of the next chunks
    v_busy text[] := '{{}}';  -- keys another claim holds the lock of
    v_new text[];
    v_running jsonb := '{{}}';  -- key -> its running jobs, counted after its lock
    v_taken jsonb := '{{}}';  -- key -> its jobs chosen here
    v_held boolean := false;
    v_read integer := 0;
    v_chunk integer := p_first;
    v_ids bigint[];
    v_keys text[];
    v_limits integer[];
    v_locks boolean[];
    v_count record;
    v_key text;
BEGIN
    IF p_finished IS NOT NULL THEN
        RETURN QUERY WITH {finish} SELECT 'f'::text, f.id, f.status::text FROM f;
    END IF;
    IF EXISTS (SELECT 1 FROM {queues} WHERE name = ANY(p_queues) AND {limited}) THEN
        RETURN QUERY SELECT 'l'::text, NULL::bigint, NULL::text;
        RETURN;
    END IF;
    WHILE cardinality(v_chosen) < p_limit AND v_read < p_scan LOOP
        SELECT array_agg(c.id ORDER BY {order}),
               array_agg(c.concurrency_key ORDER BY {order}),
               array_agg(c.concurrency_limit ORDER BY {order}),
               array_agg(pg_try_advisory_xact_lock({locks}, hashtext(c.concurrency_key))
                         ORDER BY {order})
          INTO v_ids, v_keys, v_limits, v_locks
          FROM (SELECT id, concurrency_key, concurrency_limit, priority, execute_at {keyed}) c;
        EXIT WHEN v_ids IS NULL;
        v_read := v_read + cardinality(v_ids);
        v_chunk := LEAST(v_chunk * {growth}, p_chunk);
        v_new := '{{}}';
        FOR i IN 1 .. cardinality(v_ids) LOOP
            v_key := v_keys[i];
            CONTINUE WHEN v_running ? v_key OR v_key = ANY(v_busy);
            IF v_locks[i] THEN
                v_running := v_running || jsonb_build_object(v_key, 0);
                v_new := v_new || v_key;
            ELSE
                v_busy := v_busy || v_key;  -- skipped for now, as SKIP LOCKED skips a row
            END IF;
        END LOOP;
        IF cardinality(v_new) > 0 THEN
            FOR v_count IN
                SELECT concurrency_key AS k, count(*) AS n FROM {jobs}
                 WHERE status = 'running' AND concurrency_key = ANY(v_new) GROUP BY concurrency_key
            LOOP
                v_running := v_running || jsonb_build_object(v_count.k, v_count.n);
            END LOOP;
        END IF;
        FOR i IN 1 .. cardinality(v_ids) LOOP
            v_key := v_keys[i];
            IF v_key = ANY(v_busy) OR COALESCE(v_limits[i], 1) - (v_running ->> v_key)::integer
                    - COALESCE((v_taken ->> v_key)::integer, 0) <= 0 THEN
                v_held := true;
                IF NOT v_key = ANY(v_skip) THEN
                    v_skip := v_skip || v_key;
                END IF;
                CONTINUE;
            END IF;
            EXIT WHEN cardinality(v_chosen) >= p_limit;
            v_chosen := v_chosen || v_ids[i];
            v_taken := v_taken || jsonb_build_object(v_key, COALESCE((v_taken ->> v_key)::integer, 0) + 1);
        END LOOP;
    END LOOP;
    RETURN QUERY SELECT 't'::text, c, NULL::text FROM unnest(v_chosen) AS c;
    IF v_held THEN
        RETURN QUERY SELECT 'h'::text, NULL::bigint, NULL::text;
    END IF;
END
$fn$"""


def function_text():
    """Return the ``CREATE FUNCTION`` of the keyed claim, from the texts the other claims use (the migration's text)."""
    finish = finish_ctes(dependents=False, logs=True).rstrip(", ")
    for param, argument in (("%(finished)s", "p_finished"), ("%(now)s", "p_now"), ("%(logs)s", "p_logs")):
        finish = finish.replace(param, argument)
    keyed = (
        f"FROM {TABLE} WHERE status = 'pending' AND concurrency_key IS NOT NULL AND execute_at <= p_now "
        f"AND {unexpired('p_now')} AND queue = ANY(p_queues) "
        f"AND queue NOT IN (SELECT name FROM {QUEUE_TABLE} WHERE paused) "
        "AND id <> ALL(p_in_flight) AND id <> ALL(v_chosen) AND concurrency_key <> ALL(v_skip) "
        f"ORDER BY {claim_order()} LIMIT v_chunk"
    )
    return _BODY.format(
        function=FUNCTION,
        finish=finish,
        keyed=keyed,
        queues=QUEUE_TABLE,
        jobs=TABLE,
        limited=LIMITED,
        locks=KEY_LOCKS,
        growth=CHUNK_GROWTH,
        order=claim_order("c"),
    )


STATEMENT = (
    f"WITH ch AS MATERIALIZED (SELECT * FROM {FUNCTION}(%(finished)s::jsonb, %(logs)s::json, "
    f"%(now)s::timestamptz, %(queues)s::text[], %(limit)s::integer, %(in_flight)s::bigint[], %(first)s::integer, "
    f"{CHUNK}, {KEY_SCAN})), "
    "t AS (SELECT job AS id FROM ch WHERE kind = 't'), "
    f"{claim_update('t', pending=True)} "
    "SELECT NULL::text AS kind, NULL::text AS state, u.* FROM u "
    f"UNION ALL SELECT ch.kind, ch.status, ch.job{', NULL' * (len(CLAIM_COLUMNS) - 1)} FROM ch WHERE ch.kind <> 't'"
)

_UNDEFINED_FUNCTION = "42883"
_missing_said = threading.Event()


def pg_claim_keyed(rows, *, worker, queues, limit, now, lease_until, logs=(), in_flight=(), connection):
    """Record outcome ``rows`` and claim keyed jobs in one statement on ``connection``.

    Return ``(won, claimed rows, held)``; ``(won, None, False)`` when a
    queue of ``queues`` has limits (the outcomes are recorded: the claim is
    ``keys.claim_keyed``'s); None when the function is not installed
    (nothing done: the statement failed before it ran).
    """
    params = pg_finish_and_claim_params(
        rows, worker=worker, queues=queues, now=now, lease_until=lease_until, ids=None, logs=logs, in_flight=in_flight
    )
    params["finished"] = params["finished"] if rows else None
    params["logs"] = params.get("logs", "[]")
    params["limit"] = max(int(limit), 0)
    params["first"] = first_chunk(params["limit"])
    try:
        result = _execute(connection, params)
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != _UNDEFINED_FUNCTION:
            raise
        if not _missing_said.is_set():
            _missing_said.set()
            logger.warning(
                "the keyed claim's function is not installed (run manage.py migrate): keyed claims run as a "
                "transaction of several statements, not one",
                extra={"action": "keyed_claim_statements"},
            )
        return None
    won, claimed, held, limited = {}, [], False, False
    for kind, state, *row in result:
        if kind is None:
            claimed.append(tuple(row))
        elif kind == "f":
            won[row[0]] = state
        elif kind == "h":
            held = True
        elif kind == "l":
            limited = True
    return won, (None if limited else claimed), held


def _execute(connection, params):
    with connection.cursor() as cursor:
        cursor.execute(STATEMENT, params, prepare=True)
        return cursor.fetchall()
