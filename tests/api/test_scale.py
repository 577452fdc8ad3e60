"""GET /api/jobs/ at scale: bounded counts, a few queries a page, index-backed plans.

Seeds SCALE_JOBS rows with one INSERT ... SELECT, once for the whole module:
a million on PostgreSQL, whose plans depend on the table's statistics (the
one million-row seed of a run: the SQLite pass does not repeat it), and
20,000 on SQLite, past the count's bound of 10,000 (what the pages check
does not change with more). Each test requests a page under a common filter
or ordering and checks its queries and its count; on PostgreSQL it also
checks the plans of the index-backed combinations. The time of each page is
printed (``-s``), never judged: docs/API.md has the figures.
"""

import os
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler_app.models import Job, Schedule

# No django_db mark: the module's fixtures hold the database (see `at_scale`).
# One xdist group: the seed is made once, on the worker that runs them all.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("scale")]

N = int(os.environ.get("SCALE_JOBS", "1000000" if connection.vendor == "postgresql" else "20000"))

COLUMNS = (
    "task, args, kwargs, queue, priority, execute_at, status, attempts, max_attempts, "
    "errors, cancel_requested, worker, created_at, updated_at, finished_at"
)
# n % 20: 0-1 pending, 2 running, 3-4 failed, 5 cancelled, else succeeded.
STATUS = (
    "CASE WHEN n %% 20 < 2 THEN 'pending' WHEN n %% 20 = 2 THEN 'running' "
    "WHEN n %% 20 < 5 THEN 'failed' WHEN n %% 20 = 5 THEN 'cancelled' ELSE 'succeeded' END"
)
TASK = (
    "'tests.testapp.tasks.' || CASE n %% 4 WHEN 0 THEN 'add' WHEN 1 THEN 'noop' WHEN 2 THEN 'boom' ELSE 'sleeper' END"
)
QUEUE = "CASE n %% 3 WHEN 0 THEN 'default' WHEN 1 THEN 'slow' ELSE 'other' END"
PRIORITY = "(n * 37) %% 201 - 100"

SEED_SQL = {
    "postgresql": f"""
        INSERT INTO scheduler_app_job ({COLUMNS})
        SELECT {TASK}, '[1, 2]'::jsonb, '{{}}'::jsonb, {QUEUE}, {PRIORITY},
               now() + ((n * 7919) %% 2592000 - 1296000) * interval '1 second',
               {STATUS}, 1, 3, '[]'::jsonb, false, '',
               now() - (%(n)s - n) * interval '1 second',
               now() - (%(n)s - n) * interval '1 second',
               CASE WHEN n %% 20 >= 3 THEN now() - (%(n)s - n) * interval '1 second' + interval '2 seconds' END
        FROM generate_series(1::bigint, %(n)s) AS n
    """,
    "sqlite": f"""
        INSERT INTO scheduler_app_job ({COLUMNS})
        WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %(n)s)
        SELECT {TASK}, '[1, 2]', '{{}}', {QUEUE}, {PRIORITY},
               datetime('now', ((n * 7919) %% 2592000 - 1296000) || ' seconds'),
               {STATUS}, 1, 3, '[]', 0, '',
               datetime('now', '-' || (%(n)s - n) || ' seconds'),
               datetime('now', '-' || (%(n)s - n) || ' seconds'),
               CASE WHEN n %% 20 >= 3 THEN datetime('now', '-' || (%(n)s - n - 2) || ' seconds') END
        FROM seq
    """,
}

# Filters and orderings the current indexes serve (see docs/API.md).
INDEX_BACKED = [
    "",
    "status=pending",
    "status=failed",
    "status=pending,running",
    "status=pending&ordering=execute_at",
    "status=pending&ordering=-priority",
    "status=pending&execute_after=2020-01-01T00:00:00Z&execute_before=2100-01-01T00:00:00Z",
    "ordering=id",
    "queue=slow",
    "task=tests.testapp.tasks.boom",
    "priority_min=50",
    "search=sleeper",
    "page=200",
]
# PostgreSQL proves status = 'succeeded' implies the partial index's
# status IN (...); SQLite does not, and sorts.
if connection.vendor == "postgresql":
    INDEX_BACKED.append("status=succeeded&ordering=-finished_at")
# No index serves these, on purpose (sql/indexes.py: every index costs the
# dispatcher's claims and finishes): a top-N sort over the table, or a scan
# that finds few matches. Still one bounded COUNT; docs/API.md has the figures.
SCANS = [
    "ordering=execute_at",
    "ordering=-created_at",
    "ordering=-priority",
    "search=1234",
    # A digit: the id or the text (issue 34: id IN (...) OR id = N ran its subquery per row, minutes).
    "search=0",
    "search=7&status=failed",
    "task=tests.testapp.tasks.nothing",
]
if connection.vendor != "postgresql":
    SCANS.append("status=succeeded&ordering=-finished_at")


def seed(n):
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(SEED_SQL[connection.vendor], {"n": n})
        cursor.execute(
            "ANALYZE" if connection.vendor == "sqlite" else "ANALYZE scheduler_app_job, scheduler_app_job_search"
        )
    print(f"\nseeded {n} jobs in {time.monotonic() - started:.1f}s on {connection.vendor}")


@pytest.fixture(scope="module")
def at_scale(django_db_setup, django_db_blocker):
    """Seed N jobs once for the module; return an API client of a staff user.

    All of it happens in one transaction, rolled back after the module's last
    test: every test here sees the rows, no other module ever does. The tests
    do not take pytest-django's ``db``: its per-test teardown checks foreign
    keys, which is a scan of every row on SQLite (0.17 s a test) and,
    on PostgreSQL, runs again the millions of deferred checks the seeding
    INSERT queued (0.9 s a test). Each test gets a savepoint instead.
    """
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from tests.plumbing import grant

    with django_db_blocker.unblock():
        assert not Job.objects.exists() and not Schedule.objects.exists(), "needs empty tables"
        with transaction.atomic():
            seed(N)
            user = get_user_model().objects.create_user("scale", "scale@example.com", "pw", is_staff=True)
            grant(user, "scheduler_app.view_job")
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
            yield client
            transaction.set_rollback(True)
        if connection.vendor == "postgresql":
            # The rolled-back rows stay in the table and its indexes as dead
            # tuples until a vacuum, and ANALYZE wrote its row count in
            # place, outside the transaction: every later query of the table
            # would wade through a million dead rows (later tests ran 5x
            # slower) and see a million-row estimate. The table is empty:
            # give it new, empty files. (Schedule refers to Job, so with it.)
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE scheduler_app_job, scheduler_app_schedule CASCADE")
        assert not Job.objects.exists()


@pytest.fixture(autouse=True)
def savepoint(at_scale):
    """Roll back whatever a test writes (its transaction nests in the module's)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def check_page(api, query):
    url = f"/api/jobs/?{query}"
    api.get(url)  # warm the cache: the second request is the one measured
    with CaptureQueriesContext(connection) as ctx:
        started = time.monotonic()
        response = api.get(url)
        elapsed = time.monotonic() - started
    assert response.status_code == 200, (query, response.content[:300])
    body = response.json()
    print(
        f"\n{connection.vendor}, {N} jobs: {elapsed * 1000:8.1f} ms  count={body['count']:>8} "
        f"exact={body['count_exact']!s:5}  ?{query}"
    )
    # Token lookup, the user's and their groups' permissions, page, bounded
    # count (none on the last page), and on PostgreSQL past the cap the
    # planner's estimate (an EXPLAIN); for the late pending jobs of the page,
    # why they are late (observability.lateness): the queues' rows and the live
    # dispatchers (no dispatcher here, so no more), whatever the page's size.
    captured = [q["sql"] for q in ctx.captured_queries]
    assert len(captured) <= 8, (query, captured)
    for sql in captured:
        if "COUNT(" in sql.upper():
            assert "LIMIT" in sql.upper(), f"unbounded COUNT for ?{query}: {sql}"
    assert body["count_exact"] or body["count"] > 10_000


def query_id(query):
    return query or "(default)"


@pytest.mark.parametrize("query", INDEX_BACKED, ids=query_id)
def test_an_index_backed_page_takes_a_few_queries_and_a_bounded_count(at_scale, query):
    check_page(at_scale, query)


@pytest.mark.parametrize("query", SCANS, ids=query_id)
def test_a_page_no_index_serves_yet_is_bounded(at_scale, query):
    check_page(at_scale, query)


# Page, queue, task, priority and search are served by the primary key
# scanned backwards, with a filter: no plan of their own to check.
PLANNED = [q for q in INDEX_BACKED if not q.startswith(("page=", "queue", "task", "priority", "search"))]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
@pytest.mark.parametrize("query", PLANNED, ids=query_id)
def test_an_index_backed_filter_plans_an_index_scan(query):
    from django.http import QueryDict

    from scheduler_app.api.filters import JobFilter

    filterset = JobFilter(QueryDict(query), queryset=Job.objects.order_by("-id"))
    assert filterset.is_valid(), filterset.errors
    plan = filterset.qs[:51].explain()
    assert "Index" in plan, f"?{query}\n{plan}"
    assert "Seq Scan" not in plan, f"?{query}\n{plan}"
