"""Queue limits with real dispatcher processes: global across dispatchers, rescued when one dies, no spinning.

Overlaps are counted from the jobs' own start and end times, written by the
task itself (``span``); starts against the rate limit from the claims'
``started_at`` (the start the limit counts; the task starts a moment later).
"""

import os
import signal
import time

import psutil
import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job, Worker
from tests.plumbing import (
    dispatcher_thread,
    most_at_once,
    most_in_a_window,
    start_dispatcher,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SPAN = "tests.testapp.tasks.span"


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


def log_tail(path):
    try:
        return open(path).read()[-2000:]
    except OSError:
        return ""


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
    started = time.monotonic()
    assert run_dispatchers(count, logs=logs) == [0] * count, [log_tail(p) for p in logs]
    starts = [t.timestamp() for t in Job.objects.values_list("started_at", flat=True)]
    assert len(starts) == 30
    assert most_in_a_window(starts, 1.0) == 10
    # 30 starts at 10 a second take at least two window turns, and not much more.
    assert 2.0 <= max(starts) - min(starts) < 6.0
    assert time.monotonic() - started < 60


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
    enqueue_spans(marker_dir, 2, 0.05)
    killed_at = time.monotonic()
    rescuer = start_dispatcher("--concurrency", "2", "--lease", "1.5", log_path=tmp_path / "rescuer.log")
    try:
        # The dead one's attempt holds the only slot until its lease is rescued; then the queue flows.
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 2, 60), log_tail(tmp_path / "rescuer.log")
        assert time.monotonic() - killed_at > 1.0
        lost = Job.objects.get(args__1=30.0)
        assert lost.errors[0]["exception_class"] == "scheduler_app.lifecycle.LeaseExpired"
    finally:
        rescuer.send_signal(signal.SIGKILL)
        rescuer.wait(10)


def test_a_dispatcher_waiting_on_a_full_queue_sleeps(marker_dir, tmp_path):
    lifecycle.set_limits("slow", concurrency_limit=1)
    enqueue_spans(marker_dir, 1, 8.0)
    holder = start_dispatcher("--queue", "slow:1", log_path=tmp_path / "holder.log")
    waiter = None
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").exists(), 60), log_tail(tmp_path / "holder.log")
        enqueue_spans(marker_dir, 3, 0.01)
        waiter = start_dispatcher("--queue", "slow:4", "--poll-interval", "0.5", log_path=tmp_path / "waiter.log")
        process = psutil.Process(waiter.pid)
        assert wait_for(lambda: Worker.objects.filter(pid=waiter.pid).exists(), 30), log_tail(tmp_path / "waiter.log")
        time.sleep(0.5)
        before = process.cpu_times()
        time.sleep(2.0)
        after = process.cpu_times()
        used = (after.user + after.system) - (before.user + before.system)
        # Blocked the whole time (the holder's job runs 8 s): a spinning loop would burn 2 s of CPU.
        assert Job.objects.filter(status="succeeded").count() == 0, "the holder's job ended too soon to tell"
        assert used < 0.4, used
        # Once the holder's job ends, the waiters run.
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 4, 60), log_tail(tmp_path / "waiter.log")
    finally:
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(10)


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
    stuck, _ = lifecycle.enqueue("tests.testapp.tasks.sleeper", [3.0], queue="slow", timeout=0.3, max_attempts=1)
    enqueue_spans(marker_dir, 1, 0.01)
    started = time.monotonic()
    with dispatcher_thread({"*": ({"slow"}, 4)}, poll_interval=0.1):
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 1, 20)
        # The sleeper's thread runs on (Python cannot stop it), but its job failed at its deadline.
        assert time.monotonic() - started < 2.5
        assert Job.objects.get(pk=stuck.pk).status == "failed"
