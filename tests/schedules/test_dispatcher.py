"""Schedules against a real database: on time from the heap, exactly once across processes."""

import signal
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from scheduler_app import schedules
from scheduler_app.dispatcher.timeline import ScheduleKey
from scheduler_app.models import Job, Schedule, Worker
from scheduler_app.runtime.store import to_datetime
from tests.plumbing import fake_clock, run_until, settle, start_dispatcher, ticking_dispatcher, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.tasks.noop"


def test_a_schedule_due_in_two_seconds_fires_on_time_without_polling():
    clock = fake_clock()
    with ticking_dispatcher(clock) as dispatcher:
        polls = []
        original = dispatcher.store.changes
        dispatcher.store.changes = lambda *a, **kw: polls.append(1) or original(*a, **kw)
        dispatcher.tick(clock.time())  # the first window load: no schedule yet
        now = to_datetime(clock.time())
        start = now + timedelta(seconds=2)
        s = schedules.create(name="soon", task=NOOP, interval_seconds=3600, start_at=start, now=now)
        # The schedule's wake-up put it in the window: the loop sleeps until it is due, exactly.
        wait = dispatcher.tick(clock.time())
        assert wait == 2.0
        clock.advance(wait)
        assert settle(dispatcher, clock, lambda: Job.objects.filter(schedule=s, status="succeeded").exists())
        job = Job.objects.get(schedule=s)
        # Made and claimed at the moment it was due: no lateness at all.
        assert job.execute_at == start and job.started_at == start
        assert dispatcher.store.worker_id == job.worker
        assert polls == []  # found by its wake-up, never by a change poll
    s.refresh_from_db()
    assert s.next_run_at == start + timedelta(hours=1) and s.last_job_id == job.pk


def test_a_disabled_schedule_stops_making_jobs():
    clock = fake_clock()
    with ticking_dispatcher(clock) as dispatcher:
        dispatcher.tick(clock.time())
        now = to_datetime(clock.time())
        s = schedules.create(name="fast", task=NOOP, interval_seconds=1, start_at=now + timedelta(seconds=0.5), now=now)
        made = Job.objects.filter(schedule=s).count
        assert run_until(dispatcher, clock, lambda: made() >= 2, until=clock.time() + 10)
        assert made() == 2 and clock.time() == now.timestamp() + 1.5  # one job per run, on time
        schedules.disable(s.pk, now=to_datetime(clock.time()))
        # The disable reaches the loop (a NOTIFY of the loop's own last
        # materialisation may land after it and put the entry back for a
        # moment: the store's compare-and-set refuses a disabled schedule).
        assert settle(dispatcher, clock, lambda: ScheduleKey(s.pk) not in dispatcher.timeline)
        # Five more intervals, the loop waking at every moment it asks to.
        assert not run_until(dispatcher, clock, lambda: made() > 2, until=clock.time() + 5)
        assert made() == 2


def test_burst_dispatcher_runs_a_due_schedule():
    from django.core.management import call_command

    now = timezone.now()
    # Created a moment ago with a first run that is due now (the service takes its `now`).
    s = schedules.create(
        name="due",
        task=NOOP,
        interval_seconds=3600,
        start_at=now - timedelta(seconds=1),
        now=now - timedelta(seconds=2),
    )
    assert s.next_run_at <= timezone.now()
    call_command("rundispatcher", "--burst")
    assert Job.objects.get(schedule=s).status == "succeeded"


def listeners():
    """Return how many connections to the test database have LISTENed (and wait for notifications)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %%'"
        )
        return cursor.fetchone()[0]


@pytest.mark.postgres_only
@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 4])
def test_many_dispatcher_processes_make_exactly_one_job_per_run(count, tmp_path):
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    processes = [start_dispatcher("--concurrency", "2", log_path=log) for log in logs]
    try:
        # All of them are up and listening before the first run is due.
        assert wait_for(lambda: Worker.objects.filter(state="alive").count() == count, 60)
        assert wait_for(lambda: listeners() >= count, 30)
        start = timezone.now() + timedelta(seconds=1.5)
        s = schedules.create(name=f"every-second-{count}", task=NOOP, interval_seconds=1, start_at=start)
        assert wait_for(lambda: timezone.now() > start + timedelta(seconds=5.5), 60)
        schedules.disable(s.pk)
    finally:
        for p in processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(60) for p in processes]
    assert codes == [0] * count, "\n---\n".join(log.read_text()[-3000:] for log in logs)
    jobs = list(Job.objects.filter(schedule=s).order_by("execute_at"))
    keys = [j.unique_key for j in jobs]
    per_key = dict(Job.objects.filter(schedule=s).values_list("unique_key").annotate(n=Count("id")).order_by())
    assert set(per_key.values()) == {1}, per_key
    run_times = [j.execute_at for j in jobs]
    assert len(set(run_times)) == len(run_times)
    assert keys == [f"schedule:{s.pk}:{t.isoformat()}" for t in run_times]
    # Every second of the ~5.5 s got its run, on the grid anchored at start.
    assert len(jobs) >= 5
    assert all((t - start).total_seconds() == int((t - start).total_seconds()) for t in run_times)
    assert run_times == [start + timedelta(seconds=k) for k in range(len(run_times))]
    assert all(j.status == "succeeded" for j in jobs)
    assert Schedule.objects.get(pk=s.pk).next_run_at is None
