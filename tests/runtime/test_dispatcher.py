"""The dispatcher against a real database, on a thread, with real worker threads."""

import threading
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, Worker
from scheduler_app.runtime.store import to_datetime
from tests.plumbing import (
    claim,
    dispatcher_thread,
    fake_clock,
    run_manage,
    run_until,
    settle,
    ticked,
    ticking_dispatcher,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."


def enqueue(name, *args, **options):
    return lifecycle.enqueue(T + name, list(args), options.pop("kwargs", {}), **options)[0]


def status(job):
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def test_burst_runs_due_jobs_and_records_results():
    jobs = [enqueue("add", i, i) for i in range(20)]
    later = enqueue("add", 1, 1, execute_at=timezone.now() + timedelta(hours=1))
    call_command("rundispatcher", "--burst", "--concurrency", "3")
    results = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "result"))
    assert results == {j.pk: 2 * i for i, j in enumerate(jobs)}
    assert status(later) == "pending"
    done = Job.objects.get(pk=jobs[0].pk)
    assert done.status == "succeeded" and done.attempts == 1 and done.worker and done.finished_at
    worker = Worker.objects.get(pk=done.worker)
    assert worker.processed == 21 - 1 and worker.state == "stopped"


def test_one_slot_runs_ten_due_jobs_in_priority_order():
    now = timezone.now()
    priorities = [3, -5, 50, 0, 7, 100, -100, 20, 1, 9]
    for p in priorities:
        enqueue("noop", priority=p, execute_at=now - timedelta(seconds=1))
    call_command("rundispatcher", "--burst", "--concurrency", "1")
    ran = list(Job.objects.order_by("started_at", "id").values_list("priority", flat=True))
    assert ran == sorted(priorities, reverse=True)


def test_async_task_and_context():
    a = enqueue("async_add", 2, 3)
    c = enqueue("context_info", timeout=30)
    call_command("rundispatcher", "--burst")
    assert Job.objects.get(pk=a.pk).result == 5
    info = Job.objects.get(pk=c.pk).result
    assert info["job_id"] == c.pk and info["attempt"] == 1 and info["result_id"] == str(c.pk)
    assert info["deadline"] > time.time()


def test_failure_is_retried_with_backoff_then_succeeds(marker_dir):
    job = enqueue("flaky", marker_dir, 2, max_attempts=3)
    with dispatcher_thread():
        assert wait_for(lambda: status(job) == "succeeded", 30)
    job.refresh_from_db()
    assert job.attempts == 3 and job.result == 2
    assert [e["attempt"] for e in job.errors] == [1, 2]
    assert "RuntimeError: failure 1" in job.errors[0]["traceback"]


def test_out_of_attempts_fails_with_traceback():
    job = enqueue("boom", "bad input", max_attempts=1)
    call_command("rundispatcher", "--burst")
    job.refresh_from_db()
    assert job.status == "failed" and job.errors[0]["message"] == "bad input"
    assert "ValueError" in job.errors[0]["traceback"]


def test_far_future_job_at_the_top_does_not_delay_an_earlier_one():
    far = enqueue("noop", execute_at=timezone.now() + timedelta(seconds=240))
    with dispatcher_thread(poll_interval=60, full_sync_interval=60) as dispatcher:
        assert wait_for(lambda: far.pk in dispatcher.timeline, 10)
        soon = enqueue("noop", execute_at=timezone.now() + timedelta(seconds=0.3))
        assert wait_for(lambda: status(soon) == "succeeded", 10)
    assert status(far) == "pending"


def test_reschedule_and_cancel_are_honoured_while_sleeping(marker_dir):
    moved = enqueue("record", marker_dir, "moved", execute_at=timezone.now() + timedelta(seconds=200))
    # Due soon, but not before a loaded machine's dispatcher has started and holds it.
    cancelled = enqueue("record", marker_dir, "cancelled", execute_at=timezone.now() + timedelta(seconds=3))
    with dispatcher_thread(poll_interval=60, full_sync_interval=60) as dispatcher:
        assert wait_for(lambda: cancelled.pk in dispatcher.timeline, 10)
        lifecycle.cancel(cancelled.pk)
        assert wait_for(lambda: cancelled.pk not in dispatcher.timeline, 30)
        lifecycle.reschedule(moved.pk, execute_at=timezone.now())
        assert wait_for(lambda: status(moved) == "succeeded", 10)
        # The loop runs past the time the cancelled job had (its timers wake it).
        assert wait_for(lambda: ticked(dispatcher, since=cancelled.execute_at.timestamp()), 20)
    assert status(cancelled) == "cancelled"
    import os

    assert not any("-cancelled-" in name for name in os.listdir(marker_dir))


def test_timeout_fails_the_job_and_reuses_the_slot_at_once():
    from tests.testapp import tasks

    tasks.RELEASE.clear()
    # Runs until the test releases it (or 30 s pass), whatever its cancel flag says.
    slow = enqueue("blocker", timeout=0.3, max_attempts=1)
    after = enqueue("noop", execute_at=timezone.now() + timedelta(seconds=0.1))
    try:
        with dispatcher_thread({"*": ({"default"}, 1)}):
            # Well inside the blocker's 30 s: the only slot came back at the
            # timeout, with the blocker's thread still inside the job.
            assert wait_for(lambda: status(after) == "succeeded", 10)
            assert status(slow) == "failed"
    finally:
        tasks.RELEASE.set()
    slow.refresh_from_db()
    after.refresh_from_db()
    assert slow.errors[0]["exception_class"] == "scheduler_app.lifecycle.JobTimeout"
    assert after.started_at >= slow.finished_at  # claimed once the timeout was written


def test_cancel_of_a_running_cooperative_job():
    job = enqueue("cooperative", 30)
    with dispatcher_thread():
        assert wait_for(lambda: status(job) == "running", 10)
        assert lifecycle.cancel(job.pk) == "cancel_requested"
        assert wait_for(lambda: status(job) == "cancelled", 10)
    job.refresh_from_db()
    assert job.cancel_requested and job.finished_at


def test_backpressure_10000_due_jobs_and_2_slots():
    lifecycle.enqueue_many([{"task": T + "noop"} for _ in range(10_000)], max_size=None)
    peak = 0
    stop = threading.Event()

    def watch():
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, Job.objects.running().count())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with dispatcher_thread({"*": ({"default"}, 2)}, max_jobs=300) as dispatcher:
            assert wait_for(lambda: dispatcher.finished, 60)
            assert len(dispatcher.timeline) <= dispatcher.timeline.cap
    finally:
        stop.set()
        watcher.join()
    assert peak <= 2
    assert Job.objects.filter(status="succeeded").count() == 300
    assert Job.objects.pending().count() == 9_700


def test_late_commit_is_found_by_the_overlapping_poll_and_the_full_reload():
    clock = fake_clock()
    start = clock.time()
    with ticking_dispatcher(clock, poll_interval=0.1, full_sync_interval=1.0, sync_overlap=2.0) as dispatcher:
        dispatcher.tick(start)  # the first window load, before the rows below exist
        # Rows written without a wake-up, with updated_at in the past, as a
        # long transaction that commits late would leave them.
        now = to_datetime(clock.time())
        within = Job.objects.create(task=T + "noop", execute_at=now, updated_at=now - timedelta(seconds=1))
        beyond = Job.objects.create(task=T + "noop", execute_at=now, updated_at=now - timedelta(minutes=10))
        assert dispatcher.tick(clock.time()) == pytest.approx(0.1)  # nothing to do before the poll
        assert status(within) == status(beyond) == "pending"
        clock.advance(0.1)
        dispatcher.tick(clock.time())
        # The poll reads back sync_overlap (2 s) behind its watermark: `within`, not `beyond`.
        assert status(within) in ("running", "succeeded") and status(beyond) == "pending"
        # Polls every 0.1 s until just before the reload: none finds `beyond`.
        assert run_until(dispatcher, clock, lambda: status(beyond) != "pending", until=start + 0.95) is False
        clock.advance(start + 1.0 - clock.time())
        dispatcher.tick(clock.time())
        # The full reload (every second here) reads the whole window.
        assert status(beyond) in ("running", "succeeded")
        assert settle(dispatcher, clock, lambda: status(within) == status(beyond) == "succeeded")


def test_paused_queue_is_not_claimed_until_resumed():
    lifecycle.pause_queue("other")
    job = enqueue("important", 1)
    with dispatcher_thread() as dispatcher:
        # The loop holds the job, due, and knows its queue is paused...
        assert wait_for(lambda: job.pk in dispatcher.timeline and "other" in dispatcher.paused, 10)
        # ... and has been through its claim step since, twice.
        assert ticked(dispatcher)
        assert status(job) == "pending"
        lifecycle.resume_queue("other")
        assert wait_for(lambda: status(job) == "succeeded", 30)


def test_expired_leases_are_rescued_by_a_running_dispatcher():
    job = enqueue("add", 1, 2, max_attempts=2)
    (claimed,) = claim("dead-worker", queues=["default"], limit=1, lease=0.2)
    with dispatcher_thread(lease=0.6):
        assert wait_for(lambda: status(job) == "succeeded", 15)
    job.refresh_from_db()
    assert job.attempts == 2 and job.worker_ids[0] == "dead-worker"
    assert job.errors[0]["exception_class"].endswith("LeaseExpired")


def test_stale_workers_are_marked_dead_not_deleted():
    Worker.objects.create(id="ghost", hostname="h", pid=1, last_heartbeat=timezone.now() - timedelta(hours=1))
    with dispatcher_thread(housekeeping_interval=0.1) as dispatcher:
        assert wait_for(lambda: Worker.objects.get(pk="ghost").state == "dead", 10)
        assert Worker.objects.get(pk=dispatcher.store.worker_id).alive


def test_enqueue_from_another_process_wakes_a_sleeping_dispatcher():
    far = enqueue("noop", execute_at=timezone.now() + timedelta(seconds=250))
    # NOTIFY (PostgreSQL) or the data_version check (SQLite) is what works:
    # no timer that reads the database fires within the test (the first
    # change poll is an hour away, the window reload two and a half minutes).
    with dispatcher_thread(poll_interval=3600, full_sync_interval=3600) as dispatcher:
        assert wait_for(lambda: far.pk in dispatcher.timeline, 10)
        result = run_manage("enqueue", T + "noop")
        assert result.returncode == 0, result.stderr
        job_id = int(result.stdout.strip())
        assert wait_for(lambda: Job.objects.get(pk=job_id).status == "succeeded", 10)


def test_sqlite_change_check_can_be_turned_off():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's data_version check")
    with dispatcher_thread(poll_interval=3600, full_sync_interval=3600, change_check_interval=0) as dispatcher:
        checks = []
        original = dispatcher.store.data_changed
        dispatcher.store.data_changed = lambda: checks.append(1) or original()
        result = run_manage("enqueue", T + "noop")
        job_id = int(result.stdout.strip())
        # Ticks after the commit, over more than the default check interval
        # (20 ms): a check would have run and found it.
        assert ticked(dispatcher, since=time.time() + 0.05)
        assert checks == []
        # Only the poll, an hour away, could find it now.
        assert Job.objects.get(pk=job_id).status == "pending"
        assert job_id not in dispatcher.timeline


@pytest.mark.postgres_only
def test_lost_connections_are_retried_and_nothing_is_lost():
    from django.db import connections as conns

    first = enqueue("noop")
    with dispatcher_thread(poll_interval=0.1) as dispatcher:
        assert wait_for(lambda: status(first) == "succeeded", 10)
        with conns["default"].cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        jobs = [enqueue("noop") for _ in range(5)]
        assert wait_for(lambda: all(status(j) == "succeeded" for j in jobs), 30)
        assert not dispatcher.finished


@pytest.mark.postgres_only
def test_asynchronous_commit_of_the_hot_path_is_opt_in(settings):
    from scheduler_app.runtime.store import DjangoStore

    store = DjangoStore("w", lease=30)
    assert store._hot_connection().execute("SHOW synchronous_commit").fetchone()[0] == "on"
    store.reset()
    settings.SCHEDULER = {**settings.SCHEDULER, "SYNCHRONOUS_COMMIT": False}
    assert store._hot_connection().execute("SHOW synchronous_commit").fetchone()[0] == "off"
    store.reset()
    job = enqueue("add", 2, 2)
    call_command("rundispatcher", "--burst")
    assert Job.objects.get(pk=job.pk).result == 4


@pytest.mark.postgres_only
def test_the_loop_reconnects_its_listen_and_notifications_wake_it_again():
    # No polls: only NOTIFY can bring the second job to the loop in time.
    with dispatcher_thread(poll_interval=3600, full_sync_interval=3600) as dispatcher:
        listener = dispatcher._event.source
        first = enqueue("noop")
        assert wait_for(lambda: status(first) == "succeeded", 10)
        old_socket = listener.fileno()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
            )
            assert cursor.fetchone() is not None
        assert wait_for(lambda: not listener.connected.is_set(), 10)
        assert wait_for(listener.connected.is_set, 10)  # reconnected from the loop's wait (after 0.25 s)
        second = enqueue("noop")
        assert wait_for(lambda: status(second) == "succeeded", 10)
        assert listener.fileno() is not None and old_socket is not None
