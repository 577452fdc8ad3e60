"""The store has the jobs table analysed when a read shows it outgrew its statistics (PostgreSQL).

The loop's statements are planned once, from the statistics of their first
run: after a bulk enqueue into a table that was empty then, every claim by id
scanned the whole backlog until autovacuum analysed the table.
"""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.dispatcher import store as store_module
from scheduler_app.dispatcher.store import DjangoStore

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]
ADD = "tests.testapp.tasks.add"
QUEUES = {"default", "slow"}


def reltuples():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'scheduler_app_job'::regclass")
        return cursor.fetchone()[0]


def statements(store, call):
    seen = []
    with connection.execute_wrapper(lambda execute, sql, params, many, ctx: seen.append(sql) or execute(sql, params, many, ctx)):
        result = call(store)
    return result, seen


def window(store):
    return store.load_window(QUEUES, until=time.time() + 60, limit=5000)


def analysed_empty():
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE scheduler_app_job")
    assert reltuples() <= 0  # 0, or -1 for "never": the statistics hold no rows


def test_a_large_read_of_a_table_that_outgrew_its_statistics_analyses_it():
    analysed_empty()
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(1200)])
    store = DjangoStore("w", lease=30)
    entries, seen = statements(store, window)
    assert len(entries) == 1200
    assert any(s.startswith("ANALYZE") for s in seen)
    assert reltuples() >= 1200
    # Current statistics: asked again (past the interval), nothing to do.
    store._statistics_checked -= store_module.STATISTICS_CHECK_INTERVAL
    _, seen = statements(store, window)
    assert any("reltuples" in s for s in seen) and not any(s.startswith("ANALYZE") for s in seen)


def test_the_check_is_bounded_small_reads_and_repeats_ask_nothing():
    analysed_empty()
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(store_module.STATISTICS_CHECK_ROWS - 1)])
    store = DjangoStore("w", lease=30)
    _, seen = statements(store, window)  # below the threshold: no question asked
    assert not any("reltuples" in s or s.startswith("ANALYZE") for s in seen)
    lifecycle.enqueue_many([{"task": ADD, "args": [1, 1]}, {"task": ADD, "args": [2, 2]}])
    _, seen = statements(store, window)
    assert any(s.startswith("ANALYZE") for s in seen)
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(2000)])
    _, seen = statements(store, window)  # within the interval: not asked again
    assert not any("reltuples" in s or s.startswith("ANALYZE") for s in seen)


def test_a_change_poll_of_many_rows_checks_too():
    analysed_empty()
    store = DjangoStore("w", lease=30)
    since = (timezone.now() - timedelta(seconds=1)).timestamp()
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(1500)])
    entries, seen = statements(store, lambda s: s.changes(QUEUES, since, limit=5000))
    assert len(entries) == 1500 and any(s.startswith("ANALYZE") for s in seen)


@pytest.mark.django_db(transaction=True)  # ANALYZE holds its lock to the end of its transaction
def test_a_table_held_by_a_vacuum_is_left_to_it_without_waiting():
    """ANALYZE waits for a vacuum of the same table; the loop does not: it gives up after a moment."""
    from scheduler_app import sql
    from scheduler_app.dispatcher import pg

    analysed_empty()
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(1200)])
    other = pg.connect()
    try:
        other.execute("BEGIN")
        other.execute("LOCK TABLE scheduler_app_job IN SHARE UPDATE EXCLUSIVE MODE")  # what a vacuum holds
        started = time.monotonic()
        assert sql.pg_analyze_if_outgrown(1200) is False
        assert time.monotonic() - started < 5  # a hang guard: lock_timeout is 200 ms
        with connection.cursor() as cursor:  # the caller's transaction is still usable
            cursor.execute("SELECT count(*) FROM scheduler_app_job")
            assert cursor.fetchone()[0] == 1200
    finally:
        other.close()
    assert sql.pg_analyze_if_outgrown(1200) is True


def test_a_table_this_user_does_not_own_is_left_to_autovacuum():
    """PostgreSQL would only warn and skip it: the store does not try (nor say it analysed)."""
    from scheduler_app import sql

    analysed_empty()
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(1200)])
    with connection.cursor() as cursor:  # a role of this test's transaction: rolled back with it
        cursor.execute("CREATE ROLE scheduler_test_not_owner")
        cursor.execute("GRANT SELECT ON scheduler_app_job TO scheduler_test_not_owner")
        cursor.execute("SET LOCAL ROLE scheduler_test_not_owner")
        try:
            ran, seen = statements(None, lambda _: sql.pg_analyze_if_outgrown(1200))
            assert ran is False and not any(s.startswith("ANALYZE") for s in seen)
        finally:
            cursor.execute("RESET ROLE")
    assert reltuples() <= 0
    assert sql.pg_analyze_if_outgrown(1200) is True  # the owner does
