"""Whether a claim could take a due job now: the last question of a ``--burst`` run before it ends."""

from django.db import transaction

from ..vocabulary.jobs import Status
from .base import TABLE, _in_list, _rows, adapt_dt, is_postgres


def any_due(queues, now, *, using="default"):
    """Return whether a pending job of ``queues`` is due at ``now``, unexpired, and not locked by another transaction.

    PostgreSQL: a row another transaction holds (an operator's ``SELECT ...
    FOR UPDATE``, a claim in flight elsewhere) is skipped, as every claim
    skips it; a burst that counted it would claim again and again for as
    long as the lock is held. The short transaction only takes the lock of
    the row it finds, and gives it back at once. SQLite has no row locks.
    """
    queues = sorted(queues)
    if not queues:
        return False
    at = adapt_dt(now, using)
    params = [Status.PENDING, at, at]
    chosen = _in_list("queue", queues, params, using)
    statement = (
        f"SELECT 1 FROM {TABLE} WHERE status = %s AND execute_at <= %s AND (expires_at IS NULL OR expires_at > %s) "
        f"AND {chosen} LIMIT 1"
    )
    if not is_postgres(using):
        return bool(_rows(statement, params, using))
    with transaction.atomic(using=using):
        return bool(_rows(statement + " FOR UPDATE SKIP LOCKED", params, using))
