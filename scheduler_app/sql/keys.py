"""The claim of jobs with a concurrency key: at most ``concurrency_limit`` of one key run at once, everywhere.

Every other claim leaves keyed jobs alone (``base.unkeyed_unexpired``), so
this one decides alone which of them start (invariant 11). One transaction:

1. read the best due keyed jobs of the queues (claim order, at most
   ``KEY_SCAN`` of them, by their own partial index ``job_pending_key_claim_idx``);
2. PostgreSQL: take a transaction-level advisory lock per key
   (``pg_advisory_xact_lock(KEY_LOCKS, hashtext(key))``), in hash order so
   two claims never wait on each other in a cycle. A second dispatcher that
   wants the same key waits here until the first commits. SQLite: writers
   take turns anyway (the transaction is IMMEDIATE);
3. count the running jobs of those keys in a statement of its own, whose
   snapshot (READ COMMITTED) is taken after the locks: it sees every claim
   of those keys that committed before;
4. take, in claim order, each candidate whose key still has room (its own
   ``concurrency_limit`` minus running jobs minus those taken just before);
5. claim them by id, compare-and-set on ``status = 'pending'``.

A key at its limit holds its jobs back (pending: ``held``) without holding
anything else: the other keys, keyless jobs and other queues are claimed as
if it were not there. Paused and limited queues are left out, as by the
plain claim; so are expired jobs.
"""

from django.db import transaction

from .base import (
    NOT_PAUSED_NOR_LIMITED,
    TABLE,
    _in_list,
    _rows,
    adapt_dt,
    claim_returning,
    is_postgres,
    unexpired,
)

# The advisory lock space of keys (the first of pg_advisory_xact_lock's two
# int4 arguments): apart from the locks an application takes with one bigint.
KEY_LOCKS = 0x5CED

# How many due keyed jobs one claim looks at: a backlog of one key longer
# than this, ahead of every other key, holds the others back until it drains.
KEY_SCAN = 1000


def claim_keyed(*, worker, queues, limit, now, lease_until, in_flight=(), scan=KEY_SCAN, using="default"):
    """Claim up to ``limit`` due keyed jobs of ``queues`` within their keys' limits.

    Return ``(claimed rows (CLAIM_COLUMNS), held)``: ``held`` is True when a
    due keyed job was left pending because its key was at its limit.
    """
    if limit <= 0 or not queues:
        return [], False
    pg = is_postgres(using)
    t = adapt_dt(now, using)
    with transaction.atomic(using=using):
        candidates = _candidates(queues, now, in_flight, scan, pg, using)
        if not candidates:
            return [], False
        keys = sorted({key for _, key, _ in candidates})
        if pg:
            _rows(
                "SELECT pg_advisory_xact_lock(%s, h) FROM "
                "(SELECT DISTINCT hashtext(k) AS h FROM unnest(%s::text[]) AS k ORDER BY 1) AS s",
                [KEY_LOCKS, keys],
                using,
            )
        params = []
        running = dict(
            _rows(
                f"SELECT concurrency_key, count(*) FROM {TABLE} WHERE status = 'running' "
                f"AND {_in_list('concurrency_key', keys, params, using)} GROUP BY concurrency_key",
                params,
                using,
            )
        )
        chosen, held = choose(candidates, running, limit)
        if not chosen:
            return [], held
        params = [worker, adapt_dt(lease_until, using), t, t, t]
        ids = _in_list("id", chosen, params, using)
        claimed = _rows(
            f"UPDATE {TABLE} SET status = 'running', attempts = attempts + 1, worker = %s, "
            "lease_expires_at = %s, started_at = COALESCE(started_at, %s), last_attempted_at = %s, "
            f"updated_at = %s, finished_at = NULL WHERE status = 'pending' AND {ids} "
            f"RETURNING {claim_returning(pg=pg)}",
            params,
            using,
        )
    return claimed, held


def choose(candidates, running, limit):
    """Return ``(ids to claim, held)`` from candidates ``(id, key, key limit)`` in claim order.

    A candidate starts when its key's running jobs plus those chosen before
    it are fewer than its own ``concurrency_limit``.
    """
    taken = {}
    chosen = []
    held = False
    for job_id, key, key_limit in candidates:
        n = running.get(key, 0) + taken.get(key, 0)
        if n >= (key_limit or 1):
            held = True
            continue
        if len(chosen) >= limit:
            break
        chosen.append(job_id)
        taken[key] = taken.get(key, 0) + 1
    return chosen, held


def _candidates(queues, now, in_flight, scan, pg, using):
    params = [adapt_dt(now, using), adapt_dt(now, using)]
    where = [
        "status = 'pending'", "concurrency_key IS NOT NULL", "execute_at <= %s", unexpired("%s"),
        _in_list("queue", sorted(queues), params, using), NOT_PAUSED_NOR_LIMITED,
    ]
    if in_flight:
        # Never a job this dispatcher still runs (invariant 14).
        where.append(f"NOT {_in_list('id', sorted(in_flight), params, using)}")
    params.append(int(scan))
    hint = "" if pg else " INDEXED BY job_pending_key_claim_idx"
    return _rows(
        f"SELECT id, concurrency_key, concurrency_limit FROM {TABLE}{hint} WHERE {' AND '.join(where)} "
        "ORDER BY priority DESC, execute_at, id LIMIT %s",
        params,
        using,
    )

