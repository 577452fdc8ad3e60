"""The store has the jobs table analysed when a read shows it outgrew its statistics (PostgreSQL).

The loop's statements are planned once, from the statistics of their first
run: after a bulk enqueue into a table that was empty then, every claim by id
scanned the whole backlog until autovacuum analysed the table.
"""

import contextlib
import re
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.runtime import store as store_module
from scheduler_app.runtime.store import DjangoStore

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]
ADD = "tests.testapp.tasks.add"
QUEUES = {"default", "slow"}


def reltuples():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'scheduler_app_job'::regclass")
        return cursor.fetchone()[0]


def statements(store, call):
    seen = []
    with connection.execute_wrapper(
        lambda execute, sql, params, many, ctx: seen.append(sql) or execute(sql, params, many, ctx)
    ):
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
    from scheduler_app.sql import connections as pg

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
    # A role of this test's transaction, rolled back with it. Roles belong to
    # the server, not to a database: the name is this test database's, so that
    # parallel runs and workers do not wait on each other's.
    role = f"not_owner_{connection.settings_dict['NAME']}"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}"')
        cursor.execute(f'GRANT SELECT ON scheduler_app_job TO "{role}"')
        cursor.execute(f'SET LOCAL ROLE "{role}"')
        try:
            ran, seen = statements(None, lambda _: sql.pg_analyze_if_outgrown(1200))
            assert ran is False and not any(s.startswith("ANALYZE") for s in seen)
        finally:
            cursor.execute("RESET ROLE")
    assert reltuples() <= 0
    assert sql.pg_analyze_if_outgrown(1200) is True  # the owner does


# -- the loop's statements whatever their plan's statistics said ------------------


class LoopStatement:
    """The finish+claim statement by ids, prepared by name on the loop's own connection
    (its planner settings), so that ``explain`` shows the plan it cached when prepared."""

    def __init__(self, hot, name, limit=4):
        from scheduler_app.sql import postgres

        self.hot, self.name, self.postgres = hot, name, postgres
        names = []

        def number(match):  # %(name)s -> $n, in order of first use
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        text = re.sub(r"%\((\w+)\)s", number, postgres.pg_finish_and_claim_text(True, limit, True, False, False))
        types = ", ".join("timestamptz" if n in ("now", "due", "lease") else "text" for n in names)
        hot.execute(f"PREPARE {name}({types}) AS {text}")
        self.names = names

    def explain(self, finished, ids):
        """Run it (EXPLAIN ANALYZE, BUFFERS): finish ``finished`` ClaimedJobs, claim ``ids``; return the plan's text."""
        from psycopg import ClientCursor

        now = timezone.now()
        rows = [(j.id, j.worker, j.attempt, "succeeded", "null", None, None, 0, False) for j in finished]
        params = self.postgres.pg_finish_and_claim_params(
            rows, worker="w", queues=sorted(QUEUES), now=now, lease_until=now + timedelta(seconds=30), ids=ids
        )
        literals = ", ".join(ClientCursor(self.hot).mogrify("%s", [params[n]]) for n in self.names)
        return "\n".join(r[0] for r in self.hot.execute(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE {self.name}({literals})"))


@contextlib.contextmanager
def loop_store():
    """A DjangoStore whose own connection is closed after, on a table autovacuum leaves alone meanwhile
    (an analysis would replan the statements under test)."""
    store = DjangoStore("w", lease=30)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE scheduler_app_job SET (autovacuum_enabled = false)")
    try:
        yield store
    finally:
        if store._raw is not None:
            store._raw.close()  # the test database is dropped after
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE scheduler_app_job RESET (autovacuum_enabled)")


@pytest.mark.django_db(transaction=True)  # the loop's own connection must see the rows
def test_planned_while_few_jobs_ran_the_finish_and_claim_by_id_still_go_by_primary_key():
    """The loop's statements are planned once, on its own connection's settings, from the
    statistics of that moment. Planned while no job ran (the statistics say so), then run
    with 2,000 jobs running, a finish walked every running job's entry of job_status_id_idx
    to find its four: 2.3 ms a finish at 20,000 running, instead of four primary-key lookups."""
    with loop_store() as store:
        jobs = [j.pk for j in lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(3000)])]
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE scheduler_app_job")  # 3,000 pending, none running
        statement = LoopStatement(store._hot_connection(), "planned_idle")
        claimed = store.claim(QUEUES, 4, time.time(), ids=jobs[2000:2004])
        with connection.cursor() as cursor:  # 2,000 jobs another dispatcher runs
            cursor.execute(
                "UPDATE scheduler_app_job SET status = 'running', worker = 'other', attempts = 1 WHERE id = ANY(%s)",
                [jobs[:2000]],
            )
        plan = statement.explain(claimed, jobs[2004:2008])
        assert "job_status_id_idx" not in plan and "Seq Scan on scheduler_app_job " not in plan, plan
        hits = int(re.search(r"Buffers: shared hit=(\d+)", plan).group(1))
        assert hits < 300, plan  # four finishes and four claims by primary key: ~100
        assert Job.objects.filter(pk__in=jobs[2000:2004], status="succeeded").count() == 4
        assert Job.objects.filter(pk__in=jobs[2004:2008], status="running", worker="w").count() == 4


@pytest.mark.django_db(transaction=True)  # the loop's own connection must see the rows
def test_planned_on_an_empty_table_a_claim_by_id_never_scans_the_table():
    """Planned when the table was empty (a new install), a claim by id was a sequential
    scan, and after a bulk enqueue of 50,000 jobs each claim read them all: 7.6 ms
    instead of 0.6 until an ANALYZE. The loop's connection turns sequential scans off."""
    with loop_store() as store:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE scheduler_app_job")  # empty, as a new install's
        hot = store._hot_connection()
        assert hot.execute("SHOW enable_seqscan").fetchone()[0] == "off"
        statement = LoopStatement(hot, "planned_empty")
        jobs = [j.pk for j in lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(3000)])]
        plan = statement.explain([], jobs[:4])
        assert "Seq Scan on scheduler_app_job " not in plan, plan
        assert Job.objects.filter(pk__in=jobs[:4], status="running", worker="w").count() == 4
