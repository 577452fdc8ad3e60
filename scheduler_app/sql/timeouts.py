"""A bound on how long one statement of a web request may run (``SCHEDULER["REQUEST_STATEMENT_TIMEOUT"]``).

A list or a search that the indexes do not serve must not hold a database
connection (and, on PostgreSQL, a backend process) for minutes, nor go on
after its client has left. :func:`bounded_statements` wraps the admin pages
and the API views of the scheduler, never the dispatcher:

- PostgreSQL: ``SET statement_timeout`` on the request's connection before
  its first statement, ``RESET`` after the request. The server cancels a
  statement that runs longer, whether or not anyone still waits for it.
- SQLite: a progress handler on the request's connection interrupts a
  statement (its execution and the fetching of its rows) once it has run
  longer than the bound; SQLite checks it every ``_SQLITE_STEPS`` steps of
  its virtual machine.

A statement cancelled this way raises :class:`StatementTimeout`, an
``OperationalError``: the API answers 503, the admin a page that says so.
"""

import contextlib
import math
import sqlite3
import time

from django.db import DatabaseError, OperationalError, connections

from .base import is_postgres

# SQLite calls the progress handler every this many virtual-machine steps (a few microseconds).
_SQLITE_STEPS = 10_000


class StatementTimeout(OperationalError):
    """A statement of a web request ran past ``REQUEST_STATEMENT_TIMEOUT`` and the database cancelled it."""

    def __init__(self, seconds):
        super().__init__(
            f"A database statement ran longer than {seconds:g} s (SCHEDULER['REQUEST_STATEMENT_TIMEOUT']) "
            "and was cancelled."
        )
        self.seconds = seconds


class _Guard:
    """An ``execute_wrapper``: arms the bound before the request's first statement, names its cancellations."""

    def __init__(self, connection, seconds):
        self.connection, self.seconds, self.armed = connection, seconds, False

    def __call__(self, execute, sql, params, many, context):
        if not self.armed:
            self.armed = True
            self.arm(context["cursor"].cursor)
        self.started()
        try:
            return execute(sql, params, many, context)
        except OperationalError as exc:
            if is_timeout(exc):
                raise StatementTimeout(self.seconds) from exc
            raise

    def started(self):
        pass


class _PostgresGuard(_Guard):
    def arm(self, raw_cursor):
        # Session-wide (not LOCAL): it must hold outside a transaction too; disarm resets it.
        raw_cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(self.seconds * 1000)}ms"])

    def disarm(self):
        connection = self.connection
        if not self.armed or connection.connection is None or connection.needs_rollback:
            return  # closed, or a transaction that failed: its rollback undoes the SET made in it
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.cursor.execute("RESET statement_timeout")


class _SQLiteGuard(_Guard):
    deadline = math.inf

    def arm(self, raw_cursor):
        self.connection.connection.set_progress_handler(self._progress, _SQLITE_STEPS)

    def started(self):
        self.deadline = time.monotonic() + self.seconds

    def _progress(self):
        return time.monotonic() > self.deadline

    def disarm(self):
        if self.armed and self.connection.connection is not None:
            self.connection.connection.set_progress_handler(None, 0)


def is_timeout(exc):
    """Return whether ``exc`` is a statement that the bound cancelled (also while its rows were fetched)."""
    if isinstance(exc, StatementTimeout):
        return True
    cause = getattr(exc, "__cause__", None)
    if isinstance(cause, sqlite3.OperationalError):
        return str(cause) == "interrupted"  # only a progress handler interrupts, and only this module sets one
    try:
        from psycopg.errors import QueryCanceled
    except ImportError:  # a SQLite-only install
        return False
    return isinstance(cause, QueryCanceled) and "statement timeout" in str(cause)


@contextlib.contextmanager
def bounded_statements(seconds, using="default"):
    """Bound each statement run on ``using`` inside the block to ``seconds`` (0 or None: no bound)."""
    if not seconds:
        yield
        return
    connection = connections[using]
    guard = (_PostgresGuard if is_postgres(using) else _SQLiteGuard)(connection, seconds)
    try:
        with connection.execute_wrapper(guard):
            yield
    finally:
        guard.disarm()
