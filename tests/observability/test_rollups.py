"""History: real dispatchers write per-minute rollups and counters; several merge; reads make buckets."""

from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Counter, Job, Rollup, RollupCursor
from scheduler_app.observability import history, rollups
from tests.plumbing import dispatcher_thread, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."


def enqueue(name, *args, **kw):
    return lifecycle.enqueue(T + name, list(args), kw.pop("kwargs", {}), **kw)[0]


def counters():
    return {
        (c.queue, c.task): (c.started, c.succeeded, c.failed, c.retried, c.cancelled) for c in Counter.objects.all()
    }


def test_two_dispatchers_rollups_and_counters_add_up():
    jobs = [enqueue("add", i, i) for i in range(30)] + [enqueue("boom", max_attempts=2) for _ in range(3)]
    with dispatcher_thread(rollup_interval=0.2), dispatcher_thread(rollup_interval=0.2):
        assert wait_for(
            lambda: not Job.objects.filter(pk__in=[j.pk for j in jobs], status__in=["pending", "running"]).exists()
        )
    # Both stopped: their last rollups are written.
    assert counters() == {("default", T + "add"): (30, 30, 0, 0, 0), ("default", T + "boom"): (6, 0, 3, 3, 0)}
    add = Counter.objects.get(task=T + "add")
    assert sum(getattr(add, f"run_{i}") for i in range(13)) == 30
    assert sum(getattr(add, f"wait_{i}") for i in range(13)) == 30 and add.wait_max < 30
    per_minute = Rollup.objects.exclude(task="").aggregate(s=Sum("started"), ok=Sum("succeeded"), r=Sum("retried"))
    assert per_minute == {"s": 36, "ok": 30, "r": 3}
    # Each queue's own row holds its samples.
    assert Rollup.objects.filter(task="", queue__in=["default", "slow", "other"]).exists()


def test_history_buckets_and_percentiles():
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    from scheduler_app.vocabulary.tallies import Tally

    old, new = Tally(started=2, succeeded=1, failed=1), Tally(started=1, retried=1)
    for v in (0.002, 0.2):
        old.run.add(v)
        old.wait.add(v)
    new.run.add(4.0)
    rollups.record({(minute.timestamp() - 120, "default", "a.b"): old, (minute.timestamp(), "slow", "c.d"): new}, now)
    h = history.series(60, now=now)
    assert h["bucket_seconds"] == 60 and len(h["buckets"]) == 60
    assert h["buckets"][-1]["start"] == minute and h["buckets"][-1]["retried"] == 1
    assert h["buckets"][-3]["succeeded"] == 1 and h["buckets"][-3]["failed"] == 1
    assert h["totals"]["started"] == 3 and h["totals"]["run"]["count"] == 3 and h["totals"]["run"]["max"] == 4.0
    assert 0.005 <= h["totals"]["run"]["p50"] <= 0.5
    only = history.series(60, queue="slow", now=now)
    assert only["totals"]["started"] == 1 and only["totals"]["wait"]["count"] == 0
    assert history.series(60, task="a.b", now=now)["totals"]["started"] == 2
    day = history.series(24 * 60, now=now)
    assert day["bucket_seconds"] == 600 and len(day["buckets"]) == 144 and day["totals"]["started"] == 3
    week = history.series(7 * 24 * 60, now=now)
    assert week["bucket_seconds"] == 3600 and len(week["buckets"]) == 168
    tasks = history.per_task(60, now=now)
    assert [(t["task"], t["runs"], t["failures"]) for t in tasks] == [("a.b", 2, 1), ("c.d", 1, 1)]
    assert tasks[0]["failure_rate"] == 0.5 and tasks[0]["last_failure"] == minute - timedelta(minutes=2)


def test_enqueued_minutes_are_counted_once_whoever_asks():
    now = timezone.now()
    assert rollups.count_enqueued(now) == 0  # the first call only starts the cursor
    cursor = RollupCursor.objects.get()
    made = cursor.at - timedelta(seconds=30)
    for _ in range(3):
        job = enqueue("add", 1, 1)
        Job.objects.filter(pk=job.pk).update(created_at=made)
    RollupCursor.objects.update(at=cursor.at - timedelta(minutes=1))
    assert rollups.count_enqueued(now) == 3
    assert rollups.count_enqueued(now) == 0  # counted already
    assert Rollup.objects.get(task=T + "add").enqueued == 3
    assert history.series(60, now=now)["totals"]["enqueued"] == 3


def test_samples_and_pruning():
    enqueue("add", 1, 1, execute_at=timezone.now() - timedelta(seconds=5))
    enqueue("add", 1, 1, execute_at=timezone.now() + timedelta(hours=1))
    now = timezone.now()
    rollups.record({}, now)
    row = Rollup.objects.get(task="", queue="default")
    assert (row.depth, row.due) == (2, 1) and row.lag >= 5
    assert history.series(60, queue="default", now=now)["buckets"][-1]["depth"] == 2
    Rollup.objects.update(minute=now - timedelta(days=8))
    Counter.objects.create(queue="default", task="x", started=1)
    assert rollups.prune(now) >= 1
    assert not Rollup.objects.exists() and Counter.objects.count() == 1
