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

The count must see every claim of the queue that committed before, and no
other may commit before this one does. On PostgreSQL a queue's row is its
turn: every claim of a limited queue's jobs (this one, ``sql.keys``) writes
the row in its transaction. The claim is one statement (a transaction of a
lock and a statement costs the dispatcher a round trip and a commit a
claim) that takes the turn without waiting, by compare-and-set: only
where the row is the version its own snapshot read (``xmin``) and no other
claim holds it (SKIP LOCKED). Then no claim of the queue committed after
the snapshot (it would have written the row) and none can before this one
commits (it would need the row), so the snapshot's counts are exact. A
queue whose turn it cannot take is contended: nothing of it is claimed
there, and the slots left go to a transaction that waits for the turn
(``PG_LOCK``), then counts in a statement of its own, whose snapshot is
taken after the lock. On SQLite writers take turns anyway.

The rate window is counted only when it may bind (PostgreSQL): the queue's
row keeps a ledger (``_pg_turn``), an upper bound of the window's starts
that costs no read. Queues without limits in the same statement are claimed
by their own claim index, as limited ones.

Each claim also reports the room it found per limited queue, so the loop
knows which queues are full and when a rate window next has room.
"""

import re

from django.db import transaction

from .base import CLAIM_COLUMNS, QUEUE_TABLE, START_TABLE, TABLE, _rows, claim_order
from .connections import raw_cursor
from .postgres import (
    NOT_IN_FLIGHT,
    UNKEYED,
    claim_update,
    finish_ctes,
    finished_row,
    finished_statuses,
    pg_finish_and_claim_params,
)

# Seconds a start is kept after it left its rate window: longer than a claim
# waits between reading its time and counting (for its turn at the queue's lock).
RATE_START_KEEP = 60.0
# Starts a claim may delete besides twice its limit (PostgreSQL).
GC_EXTRA = 16

LIMITED = "(concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)"

# A limited queue's row is this claim's turn at the queue: every claim that
# takes a job of a limited queue (this one, ``sql.keys``) writes a new version
# of the row (an UPDATE that changes nothing else) in its transaction, so its
# ``xmin`` says which claim of the queue committed last.

# The claim's turn when it must wait for it: the limited queues' rows, locked
# in name order, then written.
PG_LOCK = (
    f"UPDATE {QUEUE_TABLE} AS k SET paused = k.paused WHERE k.name IN (SELECT name FROM {QUEUE_TABLE} "
    f"WHERE name = ANY(%(queues)s::text[]) AND {LIMITED} ORDER BY name FOR UPDATE) "
    "RETURNING k.name, k.concurrency_limit, k.rate_limit, k.rate_period"
)

# Claim order within one queue, by its own claim index (PostgreSQL,
# migration 0008). The queue is named as a range of one value and comes first
# in the order: with ``queue = name`` the planner knows it constant, drops it
# from the order, and a generic plan takes the claim index of all queues
# instead, walking every due row of the others to find none of an empty
# queue. A deterministic collation: the range holds that name only.
QUEUE_ORDER = f"queue, {claim_order()}"


def one_queue(name):
    return f"queue >= {name} AND queue <= {name}"


def _window(q):
    """SQL: ``FROM ... WHERE`` the starts of queue row ``q`` in its rate window at ``%(now)s``."""
    return f"FROM {START_TABLE} s WHERE s.queue = {q}.name AND s.started_at > %(now)s - make_interval(secs => {q}.rate_period)"


def room_by_concurrency(q, ending=""):
    """SQL: how many more jobs of queue row ``q`` may run (NULL: no limit); ``ending``: running jobs not to count."""
    running = f"(SELECT count(*) FROM {TABLE} r WHERE r.status = 'running' AND r.queue = {q}.name{ending})"
    return f"CASE WHEN {q}.concurrency_limit IS NULL THEN NULL ELSE {q}.concurrency_limit - {running} END"


def room_by_rate(q):
    """SQL: how many more jobs of queue row ``q`` may start in its rate window, counted (NULL: no rate limit)."""
    return f"CASE WHEN {q}.rate_limit IS NULL THEN NULL ELSE {q}.rate_limit - (SELECT count(*) {_window(q)}) END"


# Each limited queue's room, counted: ``(name, by concurrency, by rate)``. Run
# in the queues' turn (after ``PG_LOCK``, a statement of its own), so the
# counts see every claim of those queues that committed before.
PG_ROOMS = (
    f"SELECT x.name, {room_by_concurrency('x')}, {room_by_rate('x')} FROM {QUEUE_TABLE} x "
    f"WHERE x.name = ANY(%(queues)s::text[]) AND NOT x.paused AND {LIMITED}"
)

# A contended queue's row in the claim's result (first column), and that of a room row.
CONTENDED = -2
ROOM = -1


def _pg_turn(limit):
    """The CTEs ``seen`` and ``q``: the claim's turn at its limited queues without waiting, and their room by rate.

    ``seen`` is each limited queue's row as the statement's snapshot has it;
    ``q`` takes the turn of those whose row is still that version and that
    no other claim holds, without waiting (SKIP LOCKED; a row written since
    fails the ``xmin`` test when it is read again), and writes it. The
    others are contended.

    The rate limit's ledger: ``rate_starts`` grows by ``limit`` (the most
    this claim takes of the queue). While the last exact count of the window
    (``rate_checked_*``, at or before ``now``, over the same period) plus the
    starts written since leaves more than ``limit`` of room, that sum bounds
    the window's starts from above and nothing is counted; otherwise the
    window is counted (exact: no claim of the queue committed after this
    statement's snapshot) and becomes the new check.
    """
    fresh = (
        "k.rate_checked_at IS NOT NULL AND k.rate_checked_at <= %(now)s AND k.rate_checked_period = k.rate_period "
        f"AND k.rate_checked_window + k.rate_starts - k.rate_checked_starts + {limit} < k.rate_limit"
    )
    keep = f"CASE WHEN k.rate_limit IS NULL OR ({fresh}) THEN"
    count = f"(SELECT count(*) {_window('k')})"
    return (
        f"seen AS (SELECT name, xmin AS x FROM {QUEUE_TABLE} WHERE name = ANY(%(queues)s::text[]) "
        f"AND NOT paused AND {LIMITED}), "
        f"q AS (UPDATE {QUEUE_TABLE} AS k SET "
        f"rate_checked_window = {keep} k.rate_checked_window ELSE {count} END, "
        f"rate_checked_starts = {keep} k.rate_checked_starts ELSE k.rate_starts END, "
        f"rate_checked_at = {keep} k.rate_checked_at ELSE %(now)s END, "
        f"rate_checked_period = {keep} k.rate_checked_period ELSE k.rate_period END, "
        f"rate_starts = CASE WHEN k.rate_limit IS NULL THEN k.rate_starts ELSE k.rate_starts + {limit} END "
        f"WHERE k.name IN (SELECT s.name FROM {QUEUE_TABLE} s JOIN seen ON seen.name = s.name "
        "WHERE s.xmin = seen.x FOR UPDATE OF s SKIP LOCKED) "
        "RETURNING k.name, k.concurrency_limit, k.rate_limit, k.rate_period, "
        # The new values: the check's window, plus the starts before this claim's.
        "k.rate_limit - (k.rate_checked_window + k.rate_starts - k.rate_checked_starts - "
        f"{limit}) AS by_rate), "
    )


# The running attempts ``f`` ends in the claim's statement, whose snapshot still sees them run.
ENDING = (
    " AND NOT EXISTS (SELECT 1 FROM v WHERE v.vid = r.id AND v.vworker = r.worker AND v.vattempts = r.attempts "
    "AND NOT r.has_dependents)"
)


def _pg_limited_claim_text(limit, logs=False, turn=True):
    """Return the PostgreSQL finish+claim statement of a slot group with limited queues.

    With ``turn`` it takes the limited queues' turns itself (``_pg_turn``)
    and also returns a row marked ``CONTENDED`` per limited queue whose turn
    it could not take (nothing of it claimed); without, it runs after
    ``PG_LOCK``, counts the rate window and adds its starts to the ledger.

    ``room``: per limited queue, how many more may run (``by_concurrency``;
    the attempts ``f`` ends count as ended) and start (``by_rate``) now. ``a`` takes the best due jobs of the
    group's other queues, ``b`` at most the room of each limited queue (by
    its own claim index); ``c`` the best of both. Besides the claimed and
    finished rows it returns one row per limited queue, marked ``ROOM``,
    with its room in columns of the claimed rows' shape (see ``_room_rows``);
    the oldest start of the window only where the rate may leave no room.
    """
    limit = int(limit)
    queues, ledger = (_pg_turn(limit), "") if turn else _pg_after_lock()
    return (
        f"WITH {finish_ctes(logs=logs)}{queues}"
        "room AS (SELECT q.name, q.rate_period, q.rate_limit IS NOT NULL AS rated, "
        f"{room_by_concurrency('q', ENDING)} AS by_concurrency, q.by_rate, "
        f"CASE WHEN q.by_rate > {limit} THEN NULL ELSE (SELECT min(s.started_at) {_window('q')}) END AS oldest "
        "FROM q), "
        # The other queues one by one, by their own claim index: walking the
        # claim index of all queues past a limited queue's backlog cost a scan
        # of every due row of it per claim.
        f"a AS (SELECT p.id, p.priority, p.execute_at FROM unnest(%(queues)s::text[]) AS fq(name) "
        f"CROSS JOIN LATERAL (SELECT id, priority, execute_at FROM {TABLE} WHERE status = 'pending' "
        f"AND {one_queue('fq.name')} AND execute_at <= %(due)s AND {NOT_IN_FLIGHT} AND {UNKEYED} "
        f"ORDER BY {QUEUE_ORDER} LIMIT {limit} FOR UPDATE SKIP LOCKED) p "
        f"WHERE fq.name NOT IN (SELECT name FROM {QUEUE_TABLE} WHERE paused OR {LIMITED})), "
        "b AS (SELECT p.id, p.priority, p.execute_at FROM room CROSS JOIN LATERAL "
        f"(SELECT id, priority, execute_at FROM {TABLE} WHERE status = 'pending' AND {one_queue('room.name')} "
        f"AND execute_at <= %(due)s AND {NOT_IN_FLIGHT} AND {UNKEYED} ORDER BY {QUEUE_ORDER} "
        f"LIMIT GREATEST(LEAST(COALESCE(room.by_concurrency, {limit}), COALESCE(room.by_rate, {limit}), {limit}), 0) "
        "FOR UPDATE SKIP LOCKED) p), "
        "c AS (SELECT id FROM (SELECT * FROM a UNION ALL SELECT * FROM b) x "
        f"ORDER BY {claim_order()} LIMIT {limit}), "
        f"{claim_update('c')}, {ledger}"
        f"st AS (INSERT INTO {START_TABLE} (queue, started_at) SELECT u.queue, %(now)s FROM u "
        "WHERE u.queue IN (SELECT name FROM room WHERE rated)), "
        # The starts past their window and RATE_START_KEEP, oldest first, by the
        # window's index: at most twice what a claim writes (they keep up).
        f"gc AS (DELETE FROM {START_TABLE} WHERE id = ANY(ARRAY(SELECT o.id FROM room CROSS JOIN LATERAL "
        f"(SELECT id FROM {START_TABLE} s WHERE s.queue = room.name AND s.started_at <= "
        f"%(now)s - make_interval(secs => room.rate_period + {RATE_START_KEEP}) ORDER BY s.started_at "
        f"LIMIT {2 * limit + GC_EXTRA}) o WHERE room.rated))) "
        f"{_pg_result(turn)}"
    )


def _pg_after_lock():
    """The CTEs ``q`` (the limited queues and their room by rate, counted) and ``led`` of the claim after ``PG_LOCK``.

    ``led`` adds the claim's starts to the ledger: ``PG_LOCK`` wrote the
    rows in an earlier statement of this transaction.
    """
    queues = (
        f"q AS (SELECT x.name, x.concurrency_limit, x.rate_limit, x.rate_period, {room_by_rate('x')} AS by_rate "
        f"FROM {QUEUE_TABLE} x WHERE x.name = ANY(%(queues)s::text[]) AND NOT x.paused AND {LIMITED}), "
    )
    ledger = (
        f"led AS (UPDATE {QUEUE_TABLE} AS k SET rate_starts = k.rate_starts + "
        "(SELECT count(*) FROM u WHERE u.queue = k.name) WHERE k.name IN (SELECT name FROM room WHERE rated)), "
    )
    return queues, ledger


def _pg_result(turn):
    """The claim's result: claimed rows, finished ones, a ``ROOM`` row per limited queue (and ``CONTENDED`` ones)."""
    room = ["NULL"] * len(CLAIM_COLUMNS)
    room[CLAIM_COLUMNS.index("queue")] = "room.name"
    room[CLAIM_COLUMNS.index("execute_at")] = "EXTRACT(EPOCH FROM room.oldest)::float8"
    room[CLAIM_COLUMNS.index("attempts")] = "room.by_concurrency::integer"
    room[CLAIM_COLUMNS.index("max_attempts")] = "room.by_rate::integer"
    room[CLAIM_COLUMNS.index("timeout")] = "room.rate_period"
    contended = ["NULL"] * len(CLAIM_COLUMNS)
    contended[CLAIM_COLUMNS.index("queue")] = "seen.name"
    return (
        "SELECT NULL::bigint AS finished, * FROM u "
        f"UNION ALL SELECT {finished_row()} FROM f "
        f"UNION ALL SELECT {ROOM}, {', '.join(room)} FROM room"
        + (
            f" UNION ALL SELECT {CONTENDED}, {', '.join(contended)} FROM seen WHERE name NOT IN (SELECT name FROM q)"
            if turn
            else ""
        )
    )


_PG_TEXTS = {}


def pg_limited_claim_text(limit, logs=False, turn=True):
    key = (int(limit), bool(logs), bool(turn))
    text = _PG_TEXTS.get(key)
    if text is None:
        text = _PG_TEXTS[key] = _pg_limited_claim_text(*key)
    return text


_RAW = {}


def pg_limited_claim_raw(limit, logs=False):
    """Return ``(text with $n placeholders as bytes, parameter names in their order)`` of the claim that takes its turn.

    Run on a raw cursor (``connections.raw_cursor``): psycopg converts
    ``%(name)s`` placeholders at every execution of a statement longer than
    it caches (4 KB), and this one is longer.
    """
    key = (int(limit), bool(logs))
    raw = _RAW.get(key)
    if raw is None:
        names = []

        def number(match):
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        text = re.sub(r"%\((\w+)\)s", number, pg_limited_claim_text(*key)).replace("%%", "%")
        raw = _RAW[key] = (text.encode(), tuple(names))
    return raw


def _room_rows(rows):
    """Return ``[(queue, oldest start epoch, room by concurrency, room by rate, rate period)]`` of room rows."""
    q, at, c, r, p = (CLAIM_COLUMNS.index(n) for n in ("queue", "execute_at", "attempts", "max_attempts", "timeout"))
    return [(row[q], row[at], row[c], row[r], row[p]) for row in rows]


def pg_limited_claim(
    rows, *, worker, queues, limit, now, lease_until, logs=(), in_flight=(), connection=None, using="default"
):
    """PostgreSQL: record outcomes ``rows`` and claim up to ``limit`` jobs of ``queues`` within their limits.

    Return ``({id: status} of the outcomes that matched, claimed rows, room rows)``.

    One statement that takes the limited queues' turns without waiting
    (``PG_TURN``): its snapshot then holds every claim of those queues that
    committed before, and no other can commit before it does, so what it
    counts is exact. A claim of the same queue that committed between the
    snapshot and the turn, or that holds the turn, makes the queue
    contended: nothing of it is claimed there, and the slots left go to the
    claim that waits for its turn (``_pg_claim_in_turn``).
    """
    params = pg_finish_and_claim_params(
        rows, worker=worker, queues=queues, now=now, lease_until=lease_until, ids=None, logs=logs, in_flight=in_flight
    )
    if connection is not None:
        statement, names = pg_limited_claim_raw(limit, bool(logs))
        with raw_cursor(connection) as cursor:
            cursor.execute(statement, [params[name] for name in names], prepare=True)
            result = cursor.fetchall()
    else:
        result = _rows(pg_limited_claim_text(limit, bool(logs)), params, using)
    won = finished_statuses(result)
    claimed = [r[1:] for r in result if r[0] is None]
    rooms = _room_rows([r[1:] for r in result if r[0] == ROOM])
    if len(claimed) < limit and any(r[0] == CONTENDED for r in result):
        params = pg_finish_and_claim_params(
            [], worker=worker, queues=queues, now=now, lease_until=lease_until, ids=None, in_flight=in_flight
        )
        more, rooms = _pg_claim_in_turn(params, limit - len(claimed), connection, using)
        # The rooms were counted after the claims above: as if before, like the claimed rows.
        taken = {}
        at = CLAIM_COLUMNS.index("queue")
        for row in claimed:
            taken[row[at]] = taken.get(row[at], 0) + 1
        rooms = [
            (name, oldest, *(None if v is None else v + taken.get(name, 0) for v in (c, r)), period)
            for name, oldest, c, r, period in rooms
        ]
        claimed += more
    return won, claimed, rooms


def _pg_claim_in_turn(params, limit, connection, using):
    """Claim up to ``limit`` jobs in a transaction that waits for the limited queues' turns; return ``(rows, rooms)``.

    It locks and writes their rows first (``PG_LOCK``, name order), then
    counts and claims in a statement of its own, whose snapshot is taken
    after the lock. (Sending both in one psycopg pipeline measured no faster.)
    """
    statement = pg_limited_claim_text(limit, turn=False)
    if connection is not None:
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute(PG_LOCK, {"queues": params["queues"]}, prepare=True)
            cursor.execute(statement, params, prepare=True)
            result = cursor.fetchall()
    else:
        with transaction.atomic(using=using):
            _rows(PG_LOCK, {"queues": params["queues"]}, using)
            result = _rows(statement, params, using)
    return [r[1:] for r in result if r[0] is None], _room_rows([r[1:] for r in result if r[0] == ROOM])
