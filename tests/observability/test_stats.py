"""Counts for the API and the dashboard: exact where cheap, estimated past a size on PostgreSQL."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, Worker
from scheduler_app.observability import stats
from tests.plumbing import claim

pytestmark = pytest.mark.django_db(transaction=True)
ADD = "tests.testapp.tasks.add"


def make_jobs():
    lifecycle.enqueue_many([{"task": ADD, "args": [1, 1]} for _ in range(30)])
    lifecycle.enqueue_many([{"task": ADD, "args": [1, 1], "queue": "slow"} for _ in range(5)])
    lifecycle.enqueue(ADD, [1, 1], execute_at=timezone.now() + timedelta(hours=1))
    ids = list(Job.objects.filter(queue="default").order_by("pk").values_list("pk", flat=True)[:20])
    lifecycle.cancel_many(ids)
    claim("w", queues=["slow"], limit=2, lease=30)


def test_exact_counts_and_queues():
    make_jobs()
    Worker.objects.create(id="w", hostname="h", pid=1, queues=["default", "slow"], slots={"*": 4})
    assert stats.job_counts() == {
        "pending": 14,
        "waiting": 0,
        "running": 2,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 20,
    }
    by_name = {q["name"]: q for q in stats.queues()}
    assert set(by_name) >= {"default", "slow", "other"}
    assert (by_name["default"]["pending"], by_name["default"]["due"]) == (11, 10)
    assert (by_name["slow"]["pending"], by_name["slow"]["running"], by_name["slow"]["slots"]) == (3, 2, 4)
    assert by_name["other"]["pending"] == 0
    overview = stats.overview()
    assert overview["jobs"]["cancelled"] == 20 and overview["workers"]["alive"] == 1


@pytest.mark.postgres_only
def test_finished_counts_are_estimated_on_big_postgres_tables(monkeypatch):
    make_jobs()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    monkeypatch.setattr(stats, "EXACT_COUNT_LIMIT", 0)
    counts = stats.job_counts()
    # Active statuses stay exact; the finished one comes from pg_stats (exact on a small sample).
    assert (counts["pending"], counts["running"]) == (14, 2)
    assert counts["cancelled"] == 20


@pytest.mark.postgres_only
def test_statistics_of_a_truncated_table_are_not_trusted(monkeypatch):
    # A suite's or an operator's TRUNCATE keeps pg_class.reltuples (millions
    # once); the estimate scales it by the pages the table has now, as the planner does.
    make_jobs()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
        cursor.execute(f"TRUNCATE {Job._meta.db_table} CASCADE")
    monkeypatch.setattr(stats, "EXACT_COUNT_LIMIT", 1)
    assert set(stats.job_counts().values()) == {0}


def test_dashboard_rows():
    from scheduler_app import schedules

    now = timezone.now()
    due, _ = lifecycle.enqueue(ADD, [1, 1], execute_at=now - timedelta(minutes=1))
    soon, _ = lifecycle.enqueue(ADD, [1, 1], execute_at=now + timedelta(minutes=5))
    later, _ = lifecycle.enqueue(ADD, [1, 1], execute_at=now + timedelta(hours=3))
    schedule = schedules.create(
        name="hourly", task=ADD, args=[1, 2], interval_seconds=3600, start_at=now + timedelta(hours=1)
    )
    # Due jobs first; then future jobs and schedule runs by time.
    assert [(type(r).__name__, r.pk) for r in stats.upcoming(now)] == [
        ("Job", due.pk),
        ("Job", soon.pk),
        ("Schedule", schedule.pk),
        ("Job", later.pk),
    ]
    assert [r.pk for r in stats.upcoming(now, limit=2)] == [due.pk, soon.pk]
    assert stats.running_jobs() == [] and stats.recent_failures() == []
    Worker.objects.create(id="old", hostname="h", pid=1, state="stopped", last_heartbeat=now - timedelta(hours=2))
    Worker.objects.create(id="new", hostname="h", pid=2)
    assert [w.id for w in stats.recent_workers(now)] == ["new"]
