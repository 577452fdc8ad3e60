"""The database dialect: what the scheduler asks of its database, declared once, done twice.

Every difference between PostgreSQL and SQLite lives behind :class:`Dialect`
(Oban's ``Engine``, procrastinate's connector): the service (``lifecycle``)
and the dispatcher's store (``runtime.store``) ask :func:`dialect` for the
connection's and never test the vendor themselves (the house test holds
them to it). Rows go in and out as this package's statements shape them:
outcome rows and log rows as ``lifecycle.finishing`` builds them, claimed
rows as ``base.CLAIM_COLUMNS``, and the outcomes that won as
``{job id: status it was left in}``.
"""

from typing import Protocol

from django.db import connections

from ..vocabulary.claims import KEYED, LIMITED
from . import connections as pg_connections
from .base import is_postgres
from .bulk import pg_bulk_insert
from .keyed_claim import pg_claim_keyed
from .keys import claim_keyed
from .limited import pg_limited_claim
from .livelogs import pg_append_logs, sqlite_append_logs
from .postgres import pg_finish_and_claim, pg_insert_and_notify
from .sqlite import sqlite_claim, sqlite_finish, sqlite_limited_claim, sqlite_optimize
from .statistics import pg_analyze_if_outgrown


class Dialect(Protocol):
    name: str  # "postgresql" or "sqlite", as Django calls it
    # Whether other processes hear changes by NOTIFY (else: a change check and polls).
    notifies: bool
    # Whether a cheap check tells that another process committed (SQLite's data_version).
    checks_changes: bool

    def finish(self, rows, *, now, dependents=False, logs=(), connection=None, using="default") -> dict:
        """Record outcome ``rows`` (compare-and-set on each attempt); return ``{id: status}`` of those that won.

        Without ``dependents`` the jobs others depend on are left alone
        (``lifecycle.finishing`` finishes them with their dependents).
        """

    def claim(self, rows, request, *, lease_until, logs=(), connection=None, using="default") -> tuple:
        """Record outcome ``rows``, then claim what ``request`` (a ``vocabulary.claims.ClaimRequest``) asks for.

        The one entry of every claim: return ``(won, claimed rows, rooms, held)``
        (``rooms``: the limited queues' room, ``held``: a keyed job was held back).
        ``request.now`` is set and its queues sorted (``lifecycle.claim``).
        One statement on PostgreSQL where the kind allows (on ``connection``,
        the dispatcher's own, as a prepared statement); a finish and a claim
        on SQLite. Each dialect's ``finish_and_claim`` (plain),
        ``finish_and_claim_limited`` and ``finish_and_claim_keyed`` are its
        statements for the three kinds.
        """

    def append_logs(self, attempts, logs, *, using="default") -> set:
        """Write running ``attempts``' (``(job, worker, attempt, count)``) log rows ``logs``; return the job ids that won.

        Compare-and-set on each running attempt; ``logs_count`` grows by its count.
        """

    def insert_one(self, job, *, channel, payload_parts, using="default") -> bool:
        """Insert ``job`` and announce it in one statement, setting its id; return False where the dialect cannot."""

    def insert_many(self, jobs, *, using="default") -> bool:
        """Insert ``jobs`` in one statement, setting their ids; return False where the dialect cannot."""

    def hot_connection(self, using="default", *, synchronous_commit=True):
        """Return a new connection of the dispatcher's own for its claims (None: Django's connection serves)."""

    def data_version(self, using="default") -> int | None:
        """Return a counter that moves when another connection commits (None where there is none)."""

    def analyze_if_outgrown(self, seen, *, using="default") -> bool:
        """Have the jobs table analysed when its statistics hold fewer rows than ``seen``; return whether it was."""

    def optimize(self, *, using="default") -> None:
        """Let the planner have statistics, bounded (housekeeping)."""


class _OneClaim:
    """``Dialect.claim``: the request's kind chooses the dialect's statement; one shape comes back."""

    def claim(self, rows, request, *, lease_until, logs=(), connection=None, using="default"):
        common = {
            "worker": request.worker,
            "queues": list(request.queues),
            "limit": max(request.limit, 0),
            "now": request.now,
            "lease_until": lease_until,
            "logs": logs,
            "in_flight": list(request.in_flight),
            "connection": connection,
            "using": using,
        }
        if request.kind == LIMITED:
            won, claimed, rooms = self.finish_and_claim_limited(rows, **common)
            return won, claimed, rooms, False
        if request.kind == KEYED:
            won, claimed, held = self.finish_and_claim_keyed(rows, **common)
            return won, claimed, [], held
        ids = None if request.ids is None else list(request.ids)
        won, claimed = self.finish_and_claim(rows, ids=ids, due_by=request.due_by, limits=request.limits, **common)
        return won, claimed, [], False


class Postgres(_OneClaim):
    name = "postgresql"
    notifies = True
    checks_changes = False

    def finish(self, rows, *, now, dependents=False, logs=(), connection=None, using="default"):
        won, _ = pg_finish_and_claim(
            rows,
            worker="",
            queues=[],
            limit=0,
            now=now,
            lease_until=now,
            ids=None,
            dependents=dependents,
            logs=logs,
            connection=connection,
            using=using,
        )
        return won

    def finish_and_claim(self, rows, *, queues, limit, **claim):
        return pg_finish_and_claim(rows, queues=queues, limit=limit if queues else 0, **claim)

    def finish_and_claim_limited(self, rows, **claim):
        return pg_limited_claim(rows, **claim)

    def finish_and_claim_keyed(self, rows, *, now, logs=(), using="default", **claim):
        claim["now"] = now
        connection = claim.setdefault("connection", None)
        # The dispatcher's own connection: one statement (None: the session cannot have its function).
        done = None if connection is None else pg_claim_keyed(rows, logs=logs, **claim)
        if done is None:
            return claim_keyed(**claim, finish=_finisher(self, rows, now, logs, using), using=using)
        won, claimed, held = done
        if claimed is None:  # a queue has limits: the outcomes are recorded, the claim takes its turn at the queue
            _, claimed, held = claim_keyed(**claim, using=using)
        return won, claimed, held

    def append_logs(self, attempts, logs, *, using="default"):
        return pg_append_logs(attempts, logs, using=using)

    def insert_one(self, job, *, channel, payload_parts, using="default"):
        job.pk = pg_insert_and_notify(job, channel=channel, payload_parts=payload_parts, using=using)
        return True

    def insert_many(self, jobs, *, using="default"):
        return pg_bulk_insert(jobs, using=using)

    def hot_connection(self, using="default", *, synchronous_commit=True):
        return pg_connections.hot(using, synchronous_commit=synchronous_commit)

    def data_version(self, using="default"):
        return None

    def analyze_if_outgrown(self, seen, *, using="default"):
        return pg_analyze_if_outgrown(seen, using=using)

    def optimize(self, *, using="default"):
        return None


class SQLite(_OneClaim):
    name = "sqlite"
    notifies = False
    checks_changes = True

    def finish(self, rows, *, now, dependents=False, logs=(), connection=None, using="default"):
        return sqlite_finish(rows, now=now, dependents=dependents, logs=logs, using=using)

    # SQLite: the outcomes first, then the claim, on Django's connection (``connection`` is PostgreSQL's).
    def finish_and_claim(self, rows, *, queues, limit, now, logs=(), connection=None, using="default", **claim):
        won = self.finish(rows, now=now, logs=logs, using=using) if rows else {}
        if limit <= 0 or not queues:
            return won, []
        return won, sqlite_claim(queues=queues, limit=limit, now=now, using=using, **claim)

    def finish_and_claim_limited(self, rows, *, now, logs=(), connection=None, using="default", **claim):
        won = self.finish(rows, now=now, logs=logs, using=using) if rows else {}
        return won, *sqlite_limited_claim(now=now, using=using, **claim)

    def finish_and_claim_keyed(self, rows, *, now, logs=(), connection=None, using="default", **claim):
        return claim_keyed(now=now, finish=_finisher(self, rows, now, logs, using), using=using, **claim)

    def append_logs(self, attempts, logs, *, using="default"):
        return sqlite_append_logs(attempts, logs, using=using)

    def insert_one(self, job, *, channel, payload_parts, using="default"):
        return False  # no NOTIFY: the ORM's INSERT, announced in-process

    def insert_many(self, jobs, *, using="default"):
        return False  # the ORM's bulk_create

    def hot_connection(self, using="default", *, synchronous_commit=True):
        return None

    def data_version(self, using="default"):
        with connections[using].cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            return cursor.fetchone()[0]

    def analyze_if_outgrown(self, seen, *, using="default"):
        return False  # PRAGMA optimize at housekeeping does it

    def optimize(self, *, using="default"):
        sqlite_optimize(using=using)


def _finisher(dialect, rows, now, logs, using):
    """Return ``keys.claim_keyed``'s ``finish``: the dialect's finish of ``rows`` on the claim's connection, or None."""
    if not rows:
        return None
    return lambda connection: dialect.finish(rows, now=now, logs=logs, connection=connection, using=using)


_POSTGRES, _SQLITE = Postgres(), SQLite()


def dialect(using="default") -> Dialect:
    """Return the dialect of Django's database ``using``."""
    return _POSTGRES if is_postgres(using) else _SQLITE
