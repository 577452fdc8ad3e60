"""The claim of limited queues: per-queue concurrency and rate limits, enforced where jobs are claimed.

A queue with a ``concurrency_limit`` or a ``rate_limit`` is never claimed
from by the plain claim (``NOT_PAUSED_NOR_LIMITED``); this claim takes the
due jobs of a slot group's queues in claim order, at most as many of each
limited queue as its limits leave room for, across every dispatcher
(invariant 11):

- running jobs of the queue count against ``concurrency_limit`` (a job whose
  attempt timed out, or that a rescue took back, no longer runs);
- ``QueueStart`` rows count against ``rate_limit``: one per attempt started
  in the last ``rate_period`` seconds (a sliding window). The claim writes
  them, and deletes those that left the window ``RATE_START_KEEP`` seconds
  ago: a claim's time is read before it waits for its turn, so a claim may
  commit after one of a later time, and it must still find the starts of its
  own window (deleted at once, they were gone, and four dispatchers let 11
  jobs start in a second of a 10-per-second queue).

The count must see every claim that committed before: on PostgreSQL the
claim is a transaction that first locks the limited queues' rows (so claims
of one limited queue take turns), then counts and claims in a statement of
its own, whose snapshot is taken after the lock. On SQLite writers take
turns anyway. Queues without limits in the same statement cost nothing more
than in the plain claim.

Each claim also reports the room it found per limited queue, so the loop
knows which queues are full and when a rate window next has room.
"""

from datetime import timedelta

from django.db import transaction

from .base import (
    CLAIM_COLUMNS,
    NOT_PAUSED_NOR_LIMITED,
    QUEUE_TABLE,
    SQLITE_EPOCH,
    START_TABLE,
    TABLE,
    _in_list,
    _rows,
    adapt_dt,
    claim_returning,
    unkeyed_unexpired,
)
from .postgres import (
    NOT_IN_FLIGHT,
    UNKEYED,
    claim_update,
    finish_ctes,
    finished_row,
    finished_statuses,
    pg_array,
    pg_finish_and_claim_params,
)

# Seconds a start is kept after it left its rate window: longer than a claim
# waits between reading its time and counting (for its turn at the queue's lock).
RATE_START_KEEP = 60.0

LIMITED = "(concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)"

# Locks the limited queues' rows of a claim, in name order.
PG_LOCK = (
    f"SELECT name FROM {QUEUE_TABLE} WHERE name = ANY(%(queues)s::text[]) AND {LIMITED} ORDER BY name FOR UPDATE"
)


def _pg_limited_claim_text(limit, logs=False):
    """Return the PostgreSQL finish+claim statement of a slot group with limited queues.

    ``room``: per limited queue, how many more may run (``by_concurrency``;
    the attempts ``f`` ends count as ended) and start (``by_rate``) now. ``a`` takes the best due jobs of the
    group's other queues, ``b`` at most the room of each limited queue (by
    its own claim index); ``c`` the best of both. Besides the claimed and
    finished rows it returns one row per limited queue, marked ``-1``, with
    its room in columns of the claimed rows' shape (see ``_room_rows``).
    """
    limit = int(limit)
    window = "%(now)s - make_interval(secs => q.rate_period)"
    in_window = f"FROM {START_TABLE} s WHERE s.queue = q.name AND s.started_at > {window}"
    room = ["NULL"] * len(CLAIM_COLUMNS)
    room[CLAIM_COLUMNS.index("queue")] = "room.name"
    room[CLAIM_COLUMNS.index("execute_at")] = "EXTRACT(EPOCH FROM room.oldest)::float8"
    room[CLAIM_COLUMNS.index("attempts")] = "room.by_concurrency::integer"
    room[CLAIM_COLUMNS.index("max_attempts")] = "room.by_rate::integer"
    room[CLAIM_COLUMNS.index("timeout")] = "room.rate_period"
    return (
        f"WITH {finish_ctes(logs=logs)}"
        f"q AS (SELECT name, concurrency_limit, rate_limit, rate_period FROM {QUEUE_TABLE} "
        f"WHERE name = ANY(%(queues)s::text[]) AND NOT paused AND {LIMITED}), "
        "room AS (SELECT q.name, q.rate_period, q.rate_limit IS NOT NULL AS rated, "
        "CASE WHEN q.concurrency_limit IS NULL THEN NULL ELSE q.concurrency_limit - "
        f"(SELECT count(*) FROM {TABLE} r WHERE r.status = 'running' AND r.queue = q.name AND NOT EXISTS "
        # ``f`` ends these attempts in this statement, whose snapshot still sees them run.
        "(SELECT 1 FROM v WHERE v.vid = r.id AND v.vworker = r.worker AND v.vattempts = r.attempts "
        "AND NOT r.has_dependents)) END AS by_concurrency, "
        f"CASE WHEN q.rate_limit IS NULL THEN NULL ELSE q.rate_limit - (SELECT count(*) {in_window}) END AS by_rate, "
        f"CASE WHEN q.rate_limit IS NULL THEN NULL ELSE (SELECT min(s.started_at) {in_window}) END AS oldest "
        "FROM q), "
        # The other queues one by one, by their own claim index: walking the
        # claim index of all queues past a limited queue's backlog cost a scan
        # of every due row of it per claim.
        f"a AS (SELECT p.id, p.priority, p.execute_at FROM unnest(%(queues)s::text[]) AS fq(name) "
        f"CROSS JOIN LATERAL (SELECT id, priority, execute_at FROM {TABLE} WHERE status = 'pending' "
        f"AND queue = fq.name AND execute_at <= %(due)s AND {NOT_IN_FLIGHT} AND {UNKEYED} "
        f"ORDER BY priority DESC, execute_at, id LIMIT {limit} FOR UPDATE SKIP LOCKED) p "
        f"WHERE fq.name NOT IN (SELECT name FROM {QUEUE_TABLE} WHERE paused OR {LIMITED})), "
        "b AS (SELECT p.id, p.priority, p.execute_at FROM room CROSS JOIN LATERAL "
        f"(SELECT id, priority, execute_at FROM {TABLE} WHERE status = 'pending' AND queue = room.name "
        f"AND execute_at <= %(due)s AND {NOT_IN_FLIGHT} AND {UNKEYED} ORDER BY priority DESC, execute_at, id "
        f"LIMIT GREATEST(LEAST(COALESCE(room.by_concurrency, {limit}), COALESCE(room.by_rate, {limit}), {limit}), 0) "
        "FOR UPDATE SKIP LOCKED) p), "
        "c AS (SELECT id FROM (SELECT * FROM a UNION ALL SELECT * FROM b) x "
        f"ORDER BY priority DESC, execute_at, id LIMIT {limit}), "
        f"{claim_update('c')}, "
        f"st AS (INSERT INTO {START_TABLE} (queue, started_at) SELECT u.queue, %(now)s FROM u "
        "WHERE u.queue IN (SELECT name FROM room WHERE rated)), "
        f"gc AS (DELETE FROM {START_TABLE} s USING room WHERE s.queue = room.name AND room.rated "
        f"AND s.started_at <= %(now)s - make_interval(secs => room.rate_period + {RATE_START_KEEP})) "
        "SELECT NULL::bigint AS finished, * FROM u "
        f"UNION ALL SELECT {finished_row()} FROM f "
        f"UNION ALL SELECT -1, {', '.join(room)} FROM room"
    )


_PG_TEXTS = {}


def pg_limited_claim_text(limit, logs=False):
    key = (int(limit), bool(logs))
    text = _PG_TEXTS.get(key)
    if text is None:
        text = _PG_TEXTS[key] = _pg_limited_claim_text(*key)
    return text


def _room_rows(rows):
    """Return ``[(queue, oldest start epoch, room by concurrency, room by rate, rate period)]`` of room rows."""
    q, at, c, r, p = (CLAIM_COLUMNS.index(n) for n in ("queue", "execute_at", "attempts", "max_attempts", "timeout"))
    return [(row[q], row[at], row[c], row[r], row[p]) for row in rows]


def pg_limited_claim(
    rows, *, worker, queues, limit, now, lease_until, logs=(), in_flight=(), connection=None, using="default"
):
    """PostgreSQL: record outcomes ``rows`` and claim up to ``limit`` jobs of ``queues`` within their limits.

    Return ``({id: status} of the outcomes that matched, claimed rows, room rows)``.
    One transaction: lock the limited queues' rows, then the statement.
    (Sending both in one psycopg pipeline measured no faster.)
    """
    params = pg_finish_and_claim_params(
        rows, worker=worker, queues=queues, now=now, lease_until=lease_until, ids=None, logs=logs, in_flight=in_flight
    )
    statement = pg_limited_claim_text(limit, bool(logs))
    if connection is not None:
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute(PG_LOCK, {"queues": params["queues"]}, prepare=True)
            cursor.execute(statement, params, prepare=True)
            result = cursor.fetchall()
    else:
        with transaction.atomic(using=using):
            _rows(PG_LOCK, {"queues": pg_array(queues)}, using)
            result = _rows(statement, params, using)
    won = finished_statuses(result)
    claimed = [r[1:] for r in result if r[0] is None]
    return won, claimed, _room_rows([r[1:] for r in result if r[0] == -1])


def sqlite_limited_claim(*, worker, queues, limit, now, lease_until, in_flight=(), using="default"):
    """SQLite: claim up to ``limit`` due jobs of ``queues`` within their limits; return ``(claimed rows, room rows)``.

    One transaction (SQLite's writers take turns, so what it counts is what
    every committed claim left): read the room of each limited queue, claim,
    write the starts of rate-limited queues and drop those past their window.
    """
    t = adapt_dt(now, using)
    with transaction.atomic(using=using):
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
        rooms = _rows(
            f"SELECT q.name, "
            f"CASE WHEN q.rate_limit IS NULL THEN NULL ELSE (SELECT {epoch} {starts}) END, "
            f"q.concurrency_limit - (SELECT count(*) FROM {TABLE} r WHERE r.status = 'running' AND r.queue = q.name), "
            f"q.rate_limit - (SELECT count(*) {starts}), q.rate_period "
            f"FROM {QUEUE_TABLE} q WHERE {names} AND NOT q.paused AND {LIMITED}",
            [t, t, *params],
            using,
        )
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
                "ORDER BY priority DESC, execute_at, id LIMIT %s)"
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
                "ORDER BY priority DESC, execute_at, id LIMIT %s)"
            )
            select_params += [name, due, *skipped, int(room)]
        if not parts:
            return [], [(name, oldest, c, r, p) for name, oldest, c, r, p in rooms]
        chosen = f"SELECT id FROM ({' UNION ALL '.join(parts)}) ORDER BY priority DESC, execute_at, id LIMIT %s"
        claimed = _rows(
            f"UPDATE {TABLE} SET status = 'running', attempts = attempts + 1, worker = %s, "
            "lease_expires_at = %s, started_at = COALESCE(started_at, %s), last_attempted_at = %s, "
            "updated_at = %s, finished_at = NULL "
            f"WHERE status = 'pending' AND id IN ({chosen}) RETURNING {claim_returning(pg=False)}",
            [worker, adapt_dt(lease_until, using), t, t, t, *select_params, int(limit)],
            using,
        )
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
    return claimed, [(name, oldest, c, r, p) for name, oldest, c, r, p in rooms]
