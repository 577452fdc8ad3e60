"""The claim of jobs with a concurrency key: at most ``concurrency_limit`` of one key run at once, everywhere.

Every other claim leaves keyed jobs alone (``base.unkeyed_unexpired``), so
this one decides alone which of them start (invariant 11). One transaction,
which first records the claimer's outcomes (their jobs then count as ended
in what follows: one commit a cycle, as the other claims), then reads in
chunks of ``CHUNK`` candidates until the claim has its jobs or has read
``KEY_SCAN`` of them:

1. read the best due keyed jobs of the queues in claim order (by their own
   partial index ``job_pending_key_claim_idx``), leaving out the keys found
   full or busy before and the jobs already chosen;
2. PostgreSQL: take a transaction-level advisory lock per new key
   (``pg_try_advisory_xact_lock(KEY_LOCKS, hashtext(key))``, in the same
   statement as 1, on the rows it returns). A key whose
   lock another claim holds is skipped for now, as ``SKIP LOCKED`` skips a
   row: that claim may be taking its last slot, and no claim ever waits
   for another (no lock order, no deadlock). SQLite: writers take turns
   anyway (the transaction is IMMEDIATE);
3. count the running jobs of those keys in a statement of its own, whose
   snapshot (READ COMMITTED) is taken after the locks: it sees every claim
   of those keys that committed before (a lock is released after its
   transaction's commit is visible);
4. take, in claim order, each candidate whose key still has room (its own
   ``concurrency_limit`` minus running jobs minus those taken just before);

then claim the chosen jobs by id, compare-and-set on ``status = 'pending'``.

Keyed jobs of a limited queue obey its limits too: the claim takes the
queue's turn first (PostgreSQL: it locks and writes the queue's row, as the
limited claim does when it waits, ``limited.PG_LOCK``, so the two take
turns), counts its running jobs and its recent starts, and writes a start
for each job it takes from a rate-limited queue (and adds them to the
queue's ledger). On the dispatcher's own connection (PostgreSQL) the
statements are prepared.

A key at its limit holds its jobs back (pending: ``held``) without holding
anything else: the other keys, keyless jobs and other queues are claimed as
if it were not there; a full key's backlog costs the database a walk past
its rows in the index, not a read. Paused and limited queues are left out,
as by the plain claim: paused queues and expired jobs are left out.
"""

from contextlib import contextmanager

from django.db import transaction

from .base import (
    CLAIM_COLUMNS,
    QUEUE_TABLE,
    START_TABLE,
    TABLE,
    _in_list,
    _rows,
    adapt_dt,
    claim_by,
    claim_order,
    is_postgres,
    unexpired,
)
from .limited import PG_LOCK, PG_ROOMS
from .postgres import pg_array
from .sqlite import _sqlite_rooms

# The advisory lock space of keys (the first of the two int4 arguments of the
# advisory lock functions): apart from the locks an application takes with one bigint.
KEY_LOCKS = 0x5CED

# Candidates read per round trip, and at most per claim: the keys of the first
# KEY_SCAN due keyed jobs (full keys' jobs left out) are all a claim considers.
# The first chunk is a little more than the claim asks for (``first_chunk``),
# each next one CHUNK_GROWTH times the last, up to CHUNK: every candidate's key
# is locked and counted, and a key locked in vain is one other claims skip.
CHUNK = 64
CHUNK_GROWTH = 4
KEY_SCAN = 1000


def first_chunk(limit):
    return min(CHUNK, max(2 * int(limit), 8))


def claim_keyed(
    *,
    worker,
    queues,
    limit,
    now,
    lease_until,
    in_flight=(),
    scan=KEY_SCAN,
    finish=None,
    connection=None,
    using="default",
):
    """Claim up to ``limit`` due keyed jobs of ``queues`` within their keys' limits.

    Return ``(won, claimed rows (CLAIM_COLUMNS), held)``: ``held`` is True
    when a due keyed job was left pending because its key was at its limit
    (or another claim held the key's lock). ``finish``, a callable of the
    psycopg connection (or None: Django's), records the claimer's outcomes
    first, in the same transaction (one commit a cycle, not two), and
    returns ``won`` (``{}`` without it); the counts that follow see its
    jobs ended. ``connection``, a psycopg connection to the same PostgreSQL
    database (the dispatcher's own), runs it all as prepared statements
    (planning them cost as much as running them).
    """
    if (limit <= 0 or not queues) and finish is None:
        return {}, [], False
    pg = is_postgres(using)
    t = adapt_dt(now, using)
    db = _Db(connection, using)
    with db.transaction():
        won = {} if finish is None else finish(connection)
        if limit <= 0 or not queues:
            return won, [], False
        state = _Choice(limit, _queue_rooms(queues, now, pg, db))
        _choose(state, queues, now, in_flight, scan, pg, db)
        if not state.chosen:
            return won, [], state.held
        ids = []
        statement, params = claim_by(
            _in_list("id", state.chosen, ids, using),
            worker=worker,
            lease_until=lease_until,
            now=now,
            pg=pg,
            using=using,
        )
        claimed = db.rows(statement, params + ids)
        _record_starts(claimed, state.rooms, t, db)
    return won, claimed, state.held


def _choose(state, queues, now, in_flight, scan, pg, db):
    """Read due keyed candidates in growing chunks (at most ``scan`` rows) until ``state`` has chosen enough."""
    read, chunk = 0, first_chunk(state.limit)
    while not state.done() and read < scan:
        rows = _candidates(
            queues, now, [*in_flight, *state.chosen], sorted(state.excluded()), chunk, pg, db, sorted(state.running)
        )
        chunk = min(chunk * CHUNK_GROWTH, CHUNK)
        if not rows:
            break
        read += len(rows)
        # PostgreSQL: the candidates come with their keys' locks taken (True) or held elsewhere (False).
        taken = {row[1]: row[4] for row in rows if row[4] is not None} if pg else {}
        rows = [row[:4] for row in rows]
        keys = sorted({key for _, key, _, _ in rows} - state.running.keys() - state.busy)
        if keys:
            locked = [key for key in keys if taken.get(key)] if pg else keys
            state.busy.update(set(keys) - set(locked))
            state.running.update(dict.fromkeys(locked, 0))
            state.running.update(_running(locked, db))
        state.take(rows)


class _Choice:
    """What one keyed claim chose so far, and what it learnt of the keys."""

    def __init__(self, limit, rooms=None):
        self.limit = limit
        self.rooms = rooms or {}  # limited queue -> (room left, whether rate-limited)
        self.chosen = []
        self.held = False
        self.running = {}  # key -> running jobs, counted after its lock
        self.taken = {}  # key -> jobs of it chosen here
        self.full = set()  # keys at their limit
        self.busy = set()  # keys whose lock another claim holds (PostgreSQL)

    def done(self):
        return len(self.chosen) >= self.limit

    def excluded(self):
        return self.full | self.busy

    def take(self, candidates):
        """Choose, in claim order, the candidates ``(id, key, key limit, queue)`` whose key and queue have room."""
        for job_id, key, key_limit, queue in candidates:
            room = self.rooms.get(queue)
            if room is not None and room[0] is not None and room[0] <= 0:
                self.held = True  # its queue is full: wait as for a key
                continue
            if key in self.busy:
                self.held = True
                continue
            if self.running[key] + self.taken.get(key, 0) >= (key_limit or 1):
                self.held = True
                self.full.add(key)
                continue
            if self.done():
                return
            self.chosen.append(job_id)
            self.taken[key] = self.taken.get(key, 0) + 1
            if room is not None and room[0] is not None:
                self.rooms[queue] = (room[0] - 1, room[1])


def choose(candidates, running, limit):
    """Return ``(ids to claim, held)`` from candidates ``(id, key, key limit)`` in claim order, given running counts."""
    state = _Choice(limit)
    state.running = {key: running.get(key, 0) for _, key, _ in candidates}
    state.take([(*c, "") for c in candidates])
    return state.chosen, state.held


def _queue_rooms(queues, now, pg, db):
    """Return ``{queue: (room, rate-limited)}`` of the limited queues among ``queues`` (room None: no bound).

    The room is counted as the limited claim counts it, in one place per
    dialect: PostgreSQL's ``limited.PG_ROOMS``, SQLite's ``sqlite._sqlite_rooms``.
    PostgreSQL: their rows are locked first and written (name order, as
    the limited claim takes its turn when it waits for it, ``limited.PG_LOCK``),
    so the count, a statement of its own, sees every claim of those queues
    that committed before, and a limited claim that counted before this one
    commits finds the queue contended.
    """
    if pg:
        # Their turns, as the limited claim waits for them: locked in name order and written.
        names = pg_array(sorted(queues))
        db.rows(PG_LOCK, {"queues": names})
        rows = db.rows(PG_ROOMS, {"queues": names, "now": now})
    else:
        rows = [(name, c, r) for name, _, c, r, _ in _sqlite_rooms(sorted(queues), adapt_dt(now, db.using), db.using)]
    return {name: (_least(c, r), r is not None) for name, c, r in rows}


def _least(*rooms):
    """Return the smallest of the rooms that bound (None: none does)."""
    bounds = [room for room in rooms if room is not None]
    return min(bounds) if bounds else None


def _record_starts(claimed, rooms, t, db):
    """Write a start for each claimed job of a rate-limited queue (its window counts it).

    PostgreSQL: and add them to the queue's ledger (``limited._pg_turn``),
    in this claim's turn at the queue.
    """
    at = CLAIM_COLUMNS.index("queue")
    started = [row[at] for row in claimed if rooms.get(row[at], (None, False))[1]]
    if started:
        db.rows(
            f"INSERT INTO {START_TABLE} (queue, started_at) VALUES {', '.join(['(%s, %s)'] * len(started))} RETURNING id",
            [v for name in started for v in (name, t)],
        )
        if is_postgres(db.using):
            for name in sorted(set(started)):
                db.rows(
                    f"UPDATE {QUEUE_TABLE} SET rate_starts = rate_starts + %s WHERE name = %s RETURNING name",
                    [started.count(name), name],
                )


def _running(keys, db):
    if not keys:
        return {}
    params = []
    return dict(
        db.rows(
            f"SELECT concurrency_key, count(*) FROM {TABLE} WHERE status = 'running' "
            f"AND {_in_list('concurrency_key', keys, params, db.using)} GROUP BY concurrency_key",
            params,
        )
    )


class _Db:
    """Where one keyed claim runs: the dispatcher's own psycopg connection (PostgreSQL), or Django's ``using``."""

    def __init__(self, connection, using):
        self.connection = connection
        self.using = using
        self.cursor = None

    @contextmanager
    def transaction(self):
        if self.connection is None:
            with transaction.atomic(using=self.using):
                yield
            return
        with self.connection.transaction(), self.connection.cursor() as cursor:
            self.cursor = cursor
            try:
                yield
            finally:
                self.cursor = None

    def rows(self, statement, params):
        if self.cursor is None:
            return _rows(statement, params, self.using)
        self.cursor.execute(statement, params, prepare=True)
        return self.cursor.fetchall()


def _candidates(queues, now, skip_ids, skip_keys, chunk, pg, db, locked=()):
    """Return the next ``chunk`` due keyed jobs ``(id, key, key limit, queue)`` in claim order.

    PostgreSQL: each with the result of the try of its key's advisory lock
    (``pg_try_advisory_xact_lock``; None for the ``locked`` keys, this claim's already), in the
    same round trip.
    """
    params = [adapt_dt(now, db.using), adapt_dt(now, db.using)]
    where = [
        "status = 'pending'",
        "concurrency_key IS NOT NULL",
        "execute_at <= %s",
        unexpired("%s"),
        _in_list("queue", sorted(queues), params, db.using),
        f"queue NOT IN (SELECT name FROM {QUEUE_TABLE} WHERE paused)",
    ]
    if skip_ids:
        # Never a job this dispatcher still runs (invariant 14), nor one chosen already.
        where.append(f"NOT {_in_list('id', sorted(skip_ids), params, db.using)}")
    if skip_keys:
        where.append(f"NOT {_in_list('concurrency_key', skip_keys, params, db.using)}")
    params.append(int(chunk))
    hint = "" if pg else " INDEXED BY job_pending_key_claim_idx"
    statement = (
        f"SELECT id, concurrency_key, concurrency_limit, queue, priority, execute_at FROM {TABLE}{hint} "
        f"WHERE {' AND '.join(where)} ORDER BY {claim_order()} LIMIT %s"
    )
    if not pg:
        return [row[:4] for row in db.rows(statement, params)]
    # The locks are tried on the chosen rows only: the subquery's LIMIT comes first.
    return db.rows(
        "SELECT c.id, c.concurrency_key, c.concurrency_limit, c.queue, CASE WHEN c.concurrency_key = ANY(%s) "
        f"THEN NULL ELSE pg_try_advisory_xact_lock(%s, hashtext(c.concurrency_key)) END FROM ({statement}) c "
        f"ORDER BY {claim_order('c')}",
        [list(locked), KEY_LOCKS, *params],
    )
