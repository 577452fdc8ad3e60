"""Reads whose plan the ORM cannot pin: counts over the pending rows only."""

from datetime import UTC, datetime

from .base import SQLITE_EPOCH, TABLE, _rows, adapt_dt, is_postgres
from .readable import END_OF_TIME, START_OF_TIME


def pending_by_queue(now, using="default"):
    """Return ``{queue: (pending, due, oldest due execute_at or None)}`` from the pending rows only.

    SQLite, given ``GROUP BY queue``, walks the whole (queue, id) index,
    finished rows included, rather than the pending rows; it is told to use
    the partial pending index, whose size is the backlog's, not the table's.
    """
    if is_postgres(using):
        epoch = "EXTRACT(EPOCH FROM MIN(execute_at) FILTER (WHERE execute_at <= %s))::float8"
        due = "COUNT(*) FILTER (WHERE execute_at <= %s)"
        source = TABLE
    else:
        epoch = SQLITE_EPOCH.replace("%%%%", "%%").replace(
            "%(expressions)s", "MIN(CASE WHEN execute_at <= %s THEN execute_at END)"
        )
        due = "SUM(CASE WHEN execute_at <= %s THEN 1 ELSE 0 END)"
        source = f"{TABLE} INDEXED BY job_pending_time_idx"
    t = adapt_dt(now, using)
    params = [t, t] if is_postgres(using) else [t, t, t]
    rows = _rows(
        f"SELECT queue, COUNT(*), {due}, {epoch} FROM {source} WHERE status = 'pending' GROUP BY queue", params, using
    )
    found = {}
    for queue, n, due_n, oldest in rows:
        found[queue] = (n, int(due_n or 0), _moment(oldest))
    return found


def _moment(epoch):
    """Return epoch seconds as an aware datetime; the first one Python holds for an earlier one.

    Only due times reach here (``<= now``): a row's BC date or ``-infinity``
    (-inf seconds) is as late as the oldest time can be.
    """
    if epoch is None:
        return None
    try:
        return datetime.fromtimestamp(epoch, UTC)
    except (OverflowError, OSError, ValueError):
        return START_OF_TIME if epoch < 0 else END_OF_TIME
