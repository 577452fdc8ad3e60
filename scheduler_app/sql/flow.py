"""Workflows on both databases: dependencies between jobs, and unique keys held for a period.

Each function is one statement; ``lifecycle`` runs them inside the
transaction of the change they belong to (an enqueue, a finish, a cancel).
"""

from django.db import connections

from .base import DEPENDENCY_TABLE, SQLITE_EPOCH, TABLE, UNIQUE_WINDOW_TABLE, _in_list, _rows, adapt_dt, is_postgres

# Recorded as the exception class of a job cancelled because of a dependency.
DEPENDENCY_FAILED_CLASS = "scheduler_app.lifecycle.DependencyFailed"


def mark_dependencies(ids, *, using="default"):
    """Lock jobs ``ids``, mark them as having dependents; return ``{id: status}`` of those that exist.

    The status is the row's latest: an UPDATE waits for a finish that holds
    the row and then reads what it wrote. Together with the finishes'
    ``has_dependents`` test this closes the race between making a
    dependent and finishing its dependency: whichever commits second sees
    the other. Locks are taken in id order (no deadlock between two of these).
    """
    ids = sorted(set(ids))
    if not ids:
        return {}
    params = []
    if is_postgres(using):
        params.append(ids)
        chosen = f"SELECT id FROM {TABLE} WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
    else:
        chosen = f"SELECT id FROM {TABLE} WHERE {_in_list('id', ids, params, using)}"
    statement = f"UPDATE {TABLE} SET has_dependents = %s WHERE id IN ({chosen}) RETURNING id, status"
    return dict(_rows(statement, [True, *params], using))


def _cancel_when(pg):
    # A dependency that failed or was cancelled, and a job that does not run anyway.
    return (
        "d.cause IS NOT NULL AND j.on_dependency_failure = 'cancel'"
        if pg
        else ("d.cause IS NOT NULL AND on_dependency_failure = 'cancel'")
    )


def settle_dependents(ended, *, now, using="default"):
    """Move the waiting dependents of the jobs that just ended; return what changed.

    ``ended`` maps job id -> its final status (succeeded, failed or
    cancelled). A dependent's ``dependencies_left`` drops by one per ended
    dependency; at zero it becomes pending. A failed or cancelled dependency
    cancels it instead (with an ``errors`` entry naming the dependency),
    unless it was made with ``on_dependency_failure="run"``. Return
    ``[(id, new status, execute_at epoch, priority, queue, has_dependents, has a concurrency key)]``.

    Must run in the transaction that finished ``ended``, as a statement of
    its own: on PostgreSQL its snapshot is then taken after the finish
    locked those rows, so it sees every dependent committed before.
    """
    pg = is_postgres(using)
    bad = [i for i, status in ended.items() if status != "succeeded"]
    failed = [i for i, status in ended.items() if status == "failed"]
    time_text = now.isoformat()
    t = adapt_dt(now, using)
    cancel = _cancel_when(pg)
    message = (
        "'Cancelled: job ' || d.cause || CASE WHEN {failed} THEN ' failed' ELSE ' was cancelled' END "
        "|| ' and this job depends on it.'"
    )
    if pg:
        message = message.format(failed="d.cause = ANY(%(failed)s::bigint[])")
        statement = (
            f"WITH d AS (SELECT l.job_id, count(*) AS n, "
            "min(l.depends_on_id) FILTER (WHERE l.depends_on_id = ANY(%(bad)s::bigint[])) AS cause "
            f"FROM {DEPENDENCY_TABLE} l WHERE l.depends_on_id = ANY(%(ended)s::bigint[]) GROUP BY l.job_id), "
            # Rows locked in id order: two settlements never wait on each other in a circle.
            f"lk AS (SELECT id FROM {TABLE} WHERE id IN (SELECT job_id FROM d) AND status = 'waiting' "
            "ORDER BY id FOR UPDATE) "
            f"UPDATE {TABLE} AS j SET "
            f"status = CASE WHEN {cancel} THEN 'cancelled' "
            "WHEN j.dependencies_left <= d.n THEN 'pending' ELSE 'waiting' END, "
            "dependencies_left = GREATEST(j.dependencies_left - d.n, 0), "
            f"finished_at = CASE WHEN {cancel} THEN %(now)s ELSE NULL END, "
            f"errors = CASE WHEN {cancel} THEN j.errors || jsonb_build_array(jsonb_build_object("
            "'attempt', j.attempts, 'time', %(time)s::text, 'worker', '', "
            f"'exception_class', %(cls)s::text, 'message', {message}, 'traceback', '')) "
            "ELSE j.errors END, "
            "updated_at = %(now)s "
            "FROM d WHERE j.id = d.job_id AND j.id IN (SELECT id FROM lk) AND j.status = 'waiting' "
            "RETURNING j.id, j.status, EXTRACT(EPOCH FROM j.execute_at)::float8, j.priority, j.queue, j.has_dependents, "
            "j.concurrency_key IS NOT NULL"
        )
        params = {
            "bad": bad,
            "failed": failed,
            "ended": list(ended),
            "now": t,
            "time": time_text,
            "cls": DEPENDENCY_FAILED_CLASS,
        }
        return [tuple(r) for r in _rows(statement, params, using)]
    params = []
    bad_in = _in_list("depends_on_id", bad, params, using)
    ended_in = _in_list("depends_on_id", list(ended), params, using)
    d = (
        f"WITH d AS (SELECT job_id, count(*) AS n, min(CASE WHEN {bad_in} THEN depends_on_id END) AS cause "
        f"FROM {DEPENDENCY_TABLE} WHERE {ended_in} GROUP BY job_id) "
    )
    set_params = []
    failed_in = _in_list("d.cause", failed, set_params, using)
    message = message.format(failed=failed_in)
    # SQLite: writers take turns, so the statement sees every committed dependent.
    statement = (
        f"{d}UPDATE {TABLE} AS j SET "
        f"status = CASE WHEN {cancel} THEN 'cancelled' "
        "WHEN dependencies_left <= d.n THEN 'pending' ELSE 'waiting' END, "
        "dependencies_left = max(dependencies_left - d.n, 0), "
        f"finished_at = CASE WHEN {cancel} THEN %s ELSE NULL END, "
        f"errors = CASE WHEN {cancel} THEN json_insert(errors, '$[#]', json_object("
        "'attempt', attempts, 'time', %s, 'worker', '', "
        f"'exception_class', %s, 'message', {message}, 'traceback', '')) "
        "ELSE errors END, "
        "updated_at = %s "
        "FROM d WHERE j.id = d.job_id AND j.status = 'waiting' "
        f"RETURNING id, status, {SQLITE_EPOCH.replace('%(expressions)s', 'execute_at').replace('%%%%', '%%')}, "
        "priority, queue, has_dependents, concurrency_key IS NOT NULL"
    )
    # The message's placeholders come after the time and class in the text.
    all_params = params + [t, time_text, DEPENDENCY_FAILED_CLASS] + set_params + [t]
    return [tuple(r) for r in _rows(statement, all_params, using)]


def take_unique_window(key, *, until, now, using="default"):
    """Take ``key`` until ``until`` unless a live window holds it; return whether taken.

    A window is live until it expires, or until its job is cancelled (a
    cancelled job frees its key, whichever way it was cancelled: the test
    is on the holder's status when the key is asked for, so no cancel has
    to remember the window). One INSERT ... ON CONFLICT: the key is the
    table's primary key, so two enqueues racing for it are settled by the
    database (the second waits for the first's commit, then finds the key
    held). A taken window lasts from ``now`` to ``until``; a held one is
    left as it is (a later job never stretches it).
    """
    statement = (
        f"INSERT INTO {UNIQUE_WINDOW_TABLE} AS w (key, job_id, expires_at) VALUES (%s, NULL, %s) "
        "ON CONFLICT (key) DO UPDATE SET job_id = NULL, expires_at = excluded.expires_at "
        f"WHERE w.expires_at <= %s OR EXISTS (SELECT 1 FROM {TABLE} j WHERE j.id = w.job_id AND j.status = 'cancelled') "
        "RETURNING key"
    )
    return bool(_rows(statement, [key, adapt_dt(until, using), adapt_dt(now, using)], using))


def insert_dependencies(pairs, *, using="default"):
    """Insert the edges ``pairs`` (``(job_id, depends_on_id)``, distinct) in the caller's transaction.

    One statement on PostgreSQL (two arrays, unnested), ``executemany`` on
    SQLite: the ORM's ``bulk_create`` built a model instance per edge and
    spent 5 of a workflow's 10 s on 48,725 of them.
    """
    if not pairs:
        return
    with connections[using].cursor() as cursor:
        if is_postgres(using):
            jobs, targets = zip(*pairs, strict=True)
            cursor.execute(
                f"INSERT INTO {DEPENDENCY_TABLE} (job_id, depends_on_id) "
                "SELECT * FROM unnest(%s::bigint[], %s::bigint[])",
                [list(jobs), list(targets)],
            )
        else:
            cursor.executemany(f"INSERT INTO {DEPENDENCY_TABLE} (job_id, depends_on_id) VALUES (%s, %s)", pairs)
