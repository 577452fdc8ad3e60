"""GET /metrics: names, labels, values, who may scrape, and its queries with many finished rows."""

import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler_app import lifecycle
from scheduler_app.models import Job, Worker
from scheduler_app.observability import rollups
from scheduler_app.vocabulary.tallies import BUCKETS, Tally
from tests.plumbing import grant

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-token-for-metrics"
ADD = "tests.testapp.tasks.add"


def samples(body):
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture
def viewer(staff_user):
    grant(staff_user, "scheduler_app.view_job")
    client = Client()
    client.force_login(staff_user)
    return client


def test_every_metric_with_its_labels(viewer):
    now = timezone.now()
    lifecycle.enqueue(ADD, [1, 2], execute_at=now - timedelta(seconds=30))
    lifecycle.enqueue(ADD, [1, 2], queue="slow", execute_at=now + timedelta(hours=1))
    Job.objects.create(task=ADD, queue="default", status="running", attempts=1, worker="w1")
    Worker.objects.create(id="w1", hostname="h", pid=1, queues=["default", "slow"], slots={"*": 4})
    Worker.objects.create(id="w2", hostname="h", pid=2, queues=["slow"], slots={"slow": 2}, state="stopped")
    tally = Tally(started=3, succeeded=1, failed=1, retried=1)
    tally.wait.add(0.003)
    tally.run.add(0.2)
    tally.run.add(7)
    rollups.record({(now.timestamp(), "default", ADD): tally}, now)
    response = viewer.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=")
    got = samples(response.content)
    assert got[("scheduler_jobs", (("queue", "default"), ("status", "pending")))] == 1
    assert got[("scheduler_jobs", (("queue", "default"), ("status", "running")))] == 1
    # Jobs now, not attempts: the tally's finished attempts are counters only.
    assert got[("scheduler_jobs", (("queue", "default"), ("status", "succeeded")))] == 0
    assert got[("scheduler_jobs", (("queue", "slow"), ("status", "pending")))] == 1
    assert 29 < got[("scheduler_queue_lag_seconds", (("queue", "default"),))] < 60
    assert got[("scheduler_queue_lag_seconds", (("queue", "slow"),))] == 0
    for outcome, n in (("succeeded", 1), ("failed", 1), ("retried", 1), ("cancelled", 0)):
        assert got[("scheduler_jobs_finished_total", (("outcome", outcome), ("queue", "default"), ("task", ADD)))] == n
    assert got[("scheduler_job_wait_seconds_bucket", (("le", "0.005"), ("queue", "default")))] == 1
    assert got[("scheduler_job_wait_seconds_count", (("queue", "default"),))] == 1
    run = ("queue", "default"), ("task", ADD)
    assert got[("scheduler_job_duration_seconds_bucket", (("le", "0.5"), *run))] == 1
    assert got[("scheduler_job_duration_seconds_bucket", (("le", "10.0"), *run))] == 2
    assert got[("scheduler_job_duration_seconds_sum", run)] == pytest.approx(7.2)
    les = [k[1][0][1] for k in got if k[0] == "scheduler_job_wait_seconds_bucket"]
    assert les == [repr(float(b)) for b in BUCKETS] + ["+Inf"]
    assert got[("scheduler_workers", (("state", "alive"),))] == 1
    assert got[("scheduler_workers", (("state", "stopped"),))] == 1
    assert got[("scheduler_worker_slots", (("queue", "default"), ("state", "busy")))] == 1
    assert got[("scheduler_worker_slots", (("queue", "default"), ("state", "free")))] == 3
    assert got[("scheduler_worker_slots", (("queue", "slow"), ("state", "free")))] == 3


def test_who_may_scrape(staff_user, plain_user):
    assert Client().get("/metrics").status_code == 401
    client = Client()
    client.force_login(staff_user)
    assert client.get("/metrics").status_code == 403  # staff without view_job
    client.force_login(plain_user)
    grant(plain_user, "scheduler_app.view_job")
    assert client.get("/metrics").status_code == 403  # not staff
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 401  # no token set
    with override_settings(SCHEDULER={"METRICS_TOKEN": TOKEN}):
        assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert Client().post("/metrics").status_code == 405


def test_head_answers_as_get_does_without_a_body_or_its_queries(viewer, plain_user):
    lifecycle.enqueue(ADD, [1, 2])
    get = viewer.get("/metrics")
    with CaptureQueriesContext(connection) as queries:
        head = viewer.head("/metrics")
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Type"] == get["Content-Type"]
    assert not any("scheduler_app_" in q["sql"] for q in queries.captured_queries)
    assert Client().head("/metrics").status_code == 401  # the same refusals as GET
    client = Client()
    client.force_login(plain_user)
    assert client.head("/metrics").status_code == 403
    with override_settings(SCHEDULER={"METRICS_TOKEN": TOKEN}):
        assert Client().head("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert samples(viewer.get("/metrics").content).keys() == samples(get.content).keys()  # GET unchanged


def test_api_tokens_of_staff_with_view_job_work_too(staff_user):
    from rest_framework.authtoken.models import Token

    grant(staff_user, "scheduler_app.view_job")
    key = Token.objects.create(user=staff_user).key
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Token nope").status_code == 401


def test_the_job_gauges_are_the_dashboards_counts(viewer):
    """scheduler_jobs{status} summed over queues is what the dashboard shows; attempts are counters."""
    from scheduler_app.observability import stats

    now = timezone.now()
    jobs = [lifecycle.enqueue(ADD, [i, 1], queue=q)[0] for i, q in enumerate(["default"] * 5 + ["slow"] * 4)]
    lifecycle.cancel_many([j.pk for j in jobs[:3]] + [jobs[5].pk])
    Job.objects.filter(pk=jobs[3].pk).update(status="failed", attempts=3)
    Job.objects.filter(pk=jobs[6].pk).update(status="succeeded", attempts=1)
    # Attempts of the past (pruned jobs, retried attempts): counted, never in the gauges.
    rollups.record({(now.timestamp(), "default", ADD): Tally(started=9, failed=4, retried=3, cancelled=2)}, now)
    got = samples(viewer.get("/metrics").content)
    summed = {}
    for (name, labels), value in got.items():
        if name == "scheduler_jobs":
            status = dict(labels)["status"]
            summed[status] = summed.get(status, 0) + value
    assert summed == stats.job_counts()
    assert summed == {"pending": 3, "waiting": 0, "running": 0, "succeeded": 1, "failed": 1, "cancelled": 4}
    assert got[("scheduler_jobs", (("queue", "slow"), ("status", "cancelled")))] == 1
    key = (("outcome", "cancelled"), ("queue", "default"), ("task", ADD))
    assert got[("scheduler_jobs_finished_total", key)] == 2
    assert "scheduler_jobs_finished" not in {name for name, _ in got}  # a counter: only its _total sample


@pytest.mark.postgres_only
def test_a_big_tables_finished_gauges_are_the_dashboards_estimate(viewer, monkeypatch):
    from scheduler_app.observability import stats

    jobs = [lifecycle.enqueue(ADD, [i, 1])[0] for i in range(4)]
    lifecycle.cancel_many([j.pk for j in jobs[:3]])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    monkeypatch.setattr(stats, "EXACT_COUNT_LIMIT", 0)
    got = samples(viewer.get("/metrics").content)
    assert got[("scheduler_jobs", (("queue", "*"), ("status", "cancelled")))] in (
        2,
        3,
    )  # not split by queue (int(rows x frequency))
    assert got[("scheduler_jobs", (("queue", "default"), ("status", "pending")))] == 1  # active: exact
    assert ("scheduler_queue_lag_seconds", (("queue", "*"),)) not in got


# -- many finished rows ------------------------------------------------------------

# A scrape's queries do not grow with the finished rows (the counters table
# holds their totals). The million-row seed is test_scale's, on PostgreSQL
# only; how fast a scrape is belongs to make bench (the test prints it, -s).
FINISHED = 20_000


@pytest.fixture(scope="module")
def many_finished(django_db_setup, django_db_blocker):
    """FINISHED finished jobs, inserted by one SQL statement in a transaction rolled back after this module.

    Rolling back is cheaper than deleting the rows.
    On PostgreSQL the rolled-back rows stay as dead tuples and ANALYZE's row
    count stays in pg_class: the table is truncated afterwards (new, empty
    files), as the scale test does.
    """
    with django_db_blocker.unblock():
        with transaction.atomic():
            with connection.cursor() as cursor:
                columns = (
                    "task, args, kwargs, queue, priority, execute_at, status, attempts, max_attempts, result, "
                    "errors, cancel_requested, worker, created_at, updated_at, started_at, finished_at, logs_count"
                )
                if connection.vendor == "postgresql":
                    cursor.execute(
                        f"INSERT INTO scheduler_app_job ({columns}) SELECT %s, '[]', '{{}}', 'default', 0, now(), "
                        "CASE WHEN g %% 10 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 1, 'null', '[]', false, 'w', "
                        "now(), now(), now(), now() - g * interval '1 second', 0 FROM generate_series(1, %s) AS g",
                        [ADD, FINISHED],
                    )
                    cursor.execute("ANALYZE scheduler_app_job")
                else:
                    stamp = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
                    cursor.execute(
                        f"WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < %s) "
                        f"INSERT INTO scheduler_app_job ({columns}) SELECT %s, '[]', '{{}}', 'default', 0, {stamp}, "
                        "CASE WHEN x % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 1, 'null', '[]', 0, 'w', "
                        f"{stamp}, {stamp}, {stamp}, {stamp}, 0 FROM g",
                        [FINISHED, ADD],
                    )
                    cursor.execute("ANALYZE")
            yield
            transaction.set_rollback(True)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE scheduler_app_job CASCADE")


def test_a_scrape_is_a_handful_of_queries_whatever_the_finished_rows(many_finished, viewer):
    assert Job.objects.count() >= FINISHED
    Worker.objects.create(id="w1", hostname="h", pid=1, queues=["default"], slots={"*": 4})
    lifecycle.enqueue(ADD, [1, 2])
    viewer.get("/metrics")  # warm caches (the session, the permission cache is per request anyway)
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = viewer.get("/metrics")
        took = time.perf_counter() - started
    assert response.status_code == 200
    assert len(queries) <= 11, [q["sql"][:120] for q in queries]
    print(f"\nscrape with {FINISHED:,} finished rows: {len(queries)} queries, {took * 1000:.1f} ms")
    assert samples(response.content)[("scheduler_jobs", (("queue", "default"), ("status", "pending")))] == 1
