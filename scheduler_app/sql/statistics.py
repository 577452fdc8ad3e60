"""PostgreSQL: keep the jobs table's statistics ahead of the loop's generic plans (``ANALYZE`` when outgrown)."""

from django.db import OperationalError, connections, transaction

from .base import TABLE

# How long the loop waits for the jobs table's lock to analyse it (a vacuum holds it).
ANALYZE_LOCK_TIMEOUT = "200ms"


def pg_analyze_if_outgrown(seen, *, using="default"):
    """PostgreSQL: ``ANALYZE`` the jobs table when its statistics hold fewer rows than ``seen``; return whether it ran.

    ``seen`` is a number of rows just read from the table (a window load):
    the statistics can hold no fewer. The loop's statements are planned
    once, from the statistics of that moment (``runtime.store``): a
    dispatcher that started on an empty table planned its claim by id as a
    sequential scan, and after a bulk enqueue every claim scanned the whole
    backlog until autovacuum analysed the table (up to its naptime, a
    minute). An ``ANALYZE``
    invalidates those plans; the next execution plans with the new
    statistics. A table this database user does not own is left to
    autovacuum (PostgreSQL would only warn and skip it), and so is one that
    a vacuum holds (the loop waits no more than ``ANALYZE_LOCK_TIMEOUT``).
    """
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT reltuples, pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = %s::regclass", [TABLE]
        )
        row = cursor.fetchone()
        if row is None or row[0] >= seen or not row[1]:
            return False
        try:
            with transaction.atomic(using=using):
                cursor.execute(f"SET LOCAL lock_timeout = '{ANALYZE_LOCK_TIMEOUT}'")
                cursor.execute(f"ANALYZE {TABLE}")
        except OperationalError:  # lock_timeout: a vacuum or another analysis holds the table
            return False
    return True
