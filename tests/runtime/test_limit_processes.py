"""Queue limits with real dispatcher processes: global across dispatchers, rescued when one dies, no spinning.

Overlaps are counted from the jobs' own start and end times, written by the
task itself (``span``); starts against the rate limit from the claims'
``started_at`` (the start the limit counts; the task starts a moment later).
"""

import os
import signal
import time
from datetime import datetime

import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.dispatcher.fakes import FakeClock
from tests.plumbing import (
    count_claims,
    dispatcher_thread,
    log_tail,
    most_at_once,
    most_in_a_window,
    run_until,
    start_dispatcher,
    ticking_dispatcher,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SPAN = "tests.testapp.tasks.span"
HOLD = "tests.testapp.tasks.logs_then_waits"  # runs until marker_dir/release exists


def spans(marker_dir):
    """Return the (start, end) of every attempt, as the task recorded them."""
    found = []
    for name in os.listdir(marker_dir):
        with open(os.path.join(marker_dir, name)) as fh:
            start, end = (float(x) for x in fh.read().split())
        found.append((start, end))
    return found


def enqueue_spans(marker_dir, count, seconds, queue="slow"):
    lifecycle.enqueue_many([{"task": SPAN, "args": [marker_dir, seconds], "queue": queue} for _ in range(count)])


def run_dispatchers(count, *args, logs, timeout=120):
    processes = [start_dispatcher("--concurrency", "4", "--burst", *args, log_path=log) for log in logs[:count]]
    try:
        codes = [p.wait(timeout) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    return codes


def dispatchers_for_this_database():
    """Three on PostgreSQL (many hosts could share it), two on SQLite (one host's processes)."""
    return 3 if connection.vendor == "postgresql" else 2


def test_a_concurrency_limit_holds_across_dispatchers(marker_dir, tmp_path):
    lifecycle.set_limits("slow", concurrency_limit=2)
    enqueue_spans(marker_dir, 24, 0.1)
    count = dispatchers_for_this_database()
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    assert run_dispatchers(count, logs=logs) == [0] * count, [log_tail(p) for p in logs]
    intervals = spans(marker_dir)
    assert len(intervals) == 24
    assert most_at_once(intervals) == 2
    assert set(Job.objects.values_list("status", flat=True)) == {"succeeded"}


def test_a_rate_limit_holds_across_dispatchers(marker_dir, tmp_path):
    lifecycle.set_limits("slow", rate_limit=10, rate_period=1)
    enqueue_spans(marker_dir, 30, 0.01)
    count = dispatchers_for_this_database()
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    assert run_dispatchers(count, logs=logs) == [0] * count, [log_tail(p) for p in logs]
    starts = [t.timestamp() for t in Job.objects.values_list("started_at", flat=True)]
    assert len(starts) == 30
    assert most_in_a_window(starts, 1.0) == 10
    # 30 starts at 10 a second take at least two window turns.
    assert max(starts) - min(starts) >= 2.0


def test_a_crashed_dispatchers_jobs_stop_counting_once_rescued(marker_dir, tmp_path):
    lifecycle.set_limits("slow", concurrency_limit=1)
    enqueue_spans(marker_dir, 1, 30.0)
    victim = start_dispatcher("--concurrency", "2", "--lease", "1.5", log_path=tmp_path / "victim.log")
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").exists(), 60), log_tail(tmp_path / "victim.log")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
    finally:
        if victim.poll() is None:
            victim.kill()
    new = lifecycle.enqueue_many([{"task": SPAN, "args": [marker_dir, 0.05], "queue": "slow"} for _ in range(2)])
    rescuer = start_dispatcher("--concurrency", "2", "--lease", "1.5", log_path=tmp_path / "rescuer.log")
    try:
        # The dead one's attempt holds the only slot until its lease is rescued; then the queue flows.
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 2, 60), log_tail(
            tmp_path / "rescuer.log"
        )
        lost = Job.objects.get(args__1=30.0)
        assert lost.errors[0]["exception_class"] == "scheduler_app.lifecycle.LeaseExpired"
        rescued_at = datetime.fromisoformat(lost.errors[0]["time"])
        assert all(job.started_at >= rescued_at for job in Job.objects.filter(pk__in=[j.pk for j in new]))
    finally:
        rescuer.send_signal(signal.SIGKILL)
        rescuer.wait(10)


def test_a_dispatcher_waiting_on_a_full_queue_sleeps(marker_dir, tmp_path):
    """Another process holds the queue's only slot: the waiting dispatcher asks again only when its
    retry interval passes, not on every wake-up; once the slot is free, the waiting jobs run."""
    lifecycle.set_limits("slow", concurrency_limit=1)
    held, _ = lifecycle.enqueue(HOLD, [marker_dir, 0, 0, 120.0], queue="slow")
    holder = start_dispatcher("--queue", "slow:1", log_path=tmp_path / "holder.log")
    try:
        assert wait_for(lambda: Job.objects.filter(pk=held.pk, status="running").exists(), 60), log_tail(
            tmp_path / "holder.log"
        )
        enqueue_spans(marker_dir, 3, 0.01)
        clock = FakeClock(float(int(time.time())) + 2)  # the three are due
        with ticking_dispatcher(clock, {"*": ({"slow"}, 4)}, poll_interval=0.5) as waiter:
            claims = count_claims(waiter.store)
            waiter.tick(clock.time())
            asked = len(claims)
            assert asked >= 1 and Job.objects.filter(status="pending").count() == 3  # full: none claimed
            # Fifty wake-ups within the retry interval: not one more claim, and a wait each time.
            waits = [waiter.tick(clock.time() + k * 0.009) for k in range(50)]
            assert len(claims) == asked and min(waits) > 0
            clock.advance(0.5)
            waiter.tick(clock.time())
            assert len(claims) == asked + 1  # the retry interval passed: one more try, still full
            assert Job.objects.filter(status="pending").count() == 3
            open(os.path.join(marker_dir, "release"), "w").close()  # the holder's job ends
            assert wait_for(lambda: Job.objects.get(pk=held.pk).status == "succeeded", 60), log_tail(
                tmp_path / "holder.log"
            )
            # Then the waiting jobs run (on either dispatcher).
            assert run_until(
                waiter, clock, lambda: Job.objects.filter(status="succeeded").count() == 4, until=clock.time() + 60
            )
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)


def test_a_full_limited_queue_does_not_starve_another_queue_of_the_same_dispatcher(marker_dir):
    lifecycle.set_limits("slow", concurrency_limit=1)
    enqueue_spans(marker_dir, 3, 2.0)
    enqueue_spans(marker_dir, 6, 0.01, queue="default")
    with dispatcher_thread({"*": ({"default", "slow"}, 4)}):
        assert wait_for(lambda: Job.objects.filter(queue="default", status="succeeded").count() == 6, 30)
        # Meanwhile one slow job runs at a time, and the others wait their turn.
        assert Job.objects.filter(queue="slow", status="succeeded").count() == 0
        assert Job.objects.filter(queue="slow", status="running").count() == 1


def test_a_timed_out_attempt_whose_thread_still_runs_no_longer_counts(marker_dir):
    lifecycle.set_limits("slow", concurrency_limit=1)
    stuck, _ = lifecycle.enqueue(HOLD, [marker_dir, 0, 0, 60.0], queue="slow", timeout=0.3, max_attempts=1)
    enqueue_spans(marker_dir, 1, 0.01)
    with dispatcher_thread({"*": ({"slow"}, 4)}, poll_interval=0.1):
        try:
            # The stuck task's thread runs on (Python cannot stop it) until the test releases it,
            # but its job failed at its deadline and gave the queue's only place to the span.
            assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 1, 20)
            stuck.refresh_from_db()
            assert stuck.status == "failed" and stuck.errors[-1]["exception_class"].endswith("JobTimeout")
        finally:
            open(os.path.join(marker_dir, "release"), "w").close()
