"""Whether a dispatcher may still be running attempts: a lock it holds until nothing of it runs.

A job handed back at shutdown (``leases.release``) may be taken again only
once no thread of the dispatcher that ran it can still run it (threads
cannot be killed, invariant 14). Time cannot tell that (a pause, a slow
exit), so each dispatcher holds a lock that the operating system or the
database lets go of when its process ends, and gives it up itself once its
last attempt returned (``Liveness.close``):

* PostgreSQL: a transaction-level advisory lock
  (``pg_advisory_xact_lock(LIVENESS_LOCKS, hashtext(worker id))``) in a
  transaction left open on a connection of its own, let go when that
  transaction ends: at ``close()``, or when the session ends, whatever ended
  the process. An open transaction pins its server session, so the lock
  holds through a pooler in transaction mode too (a session-level lock
  would stay behind on a pooled server session, and that session's next
  user could take it again). Another session learns whether the owner is
  gone by trying the same lock for its own transaction.
* SQLite (one machine): an ``flock`` on a file beside the database file,
  let go by the kernel when the process ends.

In either case a dispatcher of this process holds its id in ``_held`` too,
so a peer in the same process (tests, an embedded dispatcher) sees it alive.
"""

import contextlib
import fcntl
import os
import re
import threading
from pathlib import Path

from django.db import connections

from .base import is_postgres

# The advisory lock space of dispatchers' lives (first int4 argument), apart
# from the keys' (``keys.KEY_LOCKS``) and an application's one-bigint locks.
LIVENESS_LOCKS = 0x5CEE

_held = set()  # worker ids whose Liveness this process holds
_held_lock = threading.Lock()


def _lock_dir(using):
    """Return the folder of SQLite's liveness files (None for a database in memory: one process)."""
    name = str(connections[using].settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file::memory:") or "mode=memory" in name:
        return None
    return Path(f"{name}.dispatchers")


def _lock_file(directory, worker_id):
    return directory / (re.sub(r"[^A-Za-z0-9._-]", "_", worker_id) + ".lock")


class Liveness:
    """The lock a dispatcher holds while any attempt of its may run; ``close()`` lets it go (idempotent)."""

    def __init__(self, worker_id, using="default"):
        self.worker_id = worker_id
        self._resource = None
        self._closed = False
        with _held_lock:
            _held.add(worker_id)
        if is_postgres(using):
            self._using = using
            self._resource = self._pg_lock()
        elif (directory := _lock_dir(using)) is not None:
            directory.mkdir(exist_ok=True)
            self._directory = directory
            fd = os.open(_lock_file(directory, worker_id), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._resource = fd

    def _pg_lock(self):
        from . import connections as pg  # psycopg: only on PostgreSQL

        connection = pg.connect(self._using)
        connection.execute("BEGIN")
        connection.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LIVENESS_LOCKS, self.worker_id])
        return connection

    def ensure(self):
        """Make sure the lock is still held (PostgreSQL: its session may have been ended); take it again if not."""
        if self._closed or isinstance(self._resource, int) or self._resource is None:
            return
        from . import connections as pg

        try:
            self._resource.execute("SELECT 1")
        except pg.TRANSIENT_ERRORS:  # the session is gone, and the lock with it
            with contextlib.suppress(*pg.TRANSIENT_ERRORS):
                self._resource.close()
            self._resource = self._pg_lock()

    def close(self):
        """Let the lock go: nothing of this dispatcher runs any more."""
        if self._closed:
            return
        self._closed = True
        resource, self._resource = self._resource, None
        if isinstance(resource, int):
            os.close(resource)
            with contextlib.suppress(OSError):
                _lock_file(self._directory, self.worker_id).unlink()
        elif resource is not None:
            # ROLLBACK lets the lock go when it returns; a closed connection's
            # server process lets it go when it exits, a moment later.
            with contextlib.suppress(Exception):  # a session that ended let the lock go already
                resource.execute("ROLLBACK")
            with contextlib.suppress(Exception):
                resource.close()
        with _held_lock:
            _held.discard(self.worker_id)


def gone(worker_ids, using="default"):
    """Return those of ``worker_ids`` whose dispatcher let its lock go (ended); in the caller's transaction.

    PostgreSQL: the try takes the owner's lock for this transaction when it
    is free (harmless: it is let go at commit).
    """
    with _held_lock:
        candidates = sorted(set(worker_ids) - _held)
    if not candidates:
        return set()
    if is_postgres(using):
        with connections[using].cursor() as cursor:
            cursor.execute(
                "SELECT w FROM unnest(%s::text[]) AS w WHERE pg_try_advisory_xact_lock(%s, hashtext(w))",
                [candidates, LIVENESS_LOCKS],
            )
            return {row[0] for row in cursor.fetchall()}
    directory = _lock_dir(using)
    if directory is None:
        return set(candidates)  # in memory: every dispatcher is in this process, and not in _held
    ended = set()
    for worker_id in candidates:
        path = _lock_file(directory, worker_id)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            ended.add(worker_id)  # never held here, or its owner cleaned up after itself
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        finally:
            os.close(fd)  # (closing lets a lock taken above go)
        ended.add(worker_id)
        with contextlib.suppress(OSError):
            path.unlink()  # its owner is gone and its id never comes back
    return ended
