"""Schedules against a real database: on time from the heap, exactly once across processes."""

import signal
import time
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from scheduler_app import schedules
from scheduler_app.models import Job, Schedule, Worker

from ..integration.helpers import dispatcher_thread, start_dispatcher, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = "tests.testapp.tasks.noop"


def test_a_schedule_due_in_two_seconds_fires_on_time_without_polling():
    with dispatcher_thread(poll_interval=60, full_sync_interval=60) as dispatcher:
        time.sleep(0.3)  # the first window load is done; the schedule arrives by wake-up only
        start = timezone.now() + timedelta(seconds=2)
        s = schedules.create(name="soon", task=NOOP, interval_seconds=3600, start_at=start)
        assert wait_for(lambda: Job.objects.filter(schedule=s, status="succeeded").exists(), 15)
        job = Job.objects.get(schedule=s)
        assert job.execute_at == start
        lateness = (job.started_at - start).total_seconds()
        assert 0 <= lateness < 1.0, lateness
        assert dispatcher.store.worker_id == job.worker
    s.refresh_from_db()
    assert s.next_run_at == start + timedelta(hours=1) and s.last_job_id == job.pk


def test_a_disabled_schedule_stops_making_jobs():
    s = schedules.create(name="fast", task=NOOP, interval_seconds=1, start_at=timezone.now() + timedelta(seconds=0.5))
    with dispatcher_thread(poll_interval=0.2):
        assert wait_for(lambda: Job.objects.filter(schedule=s).count() >= 2, 15)
        schedules.disable(s.pk)
        time.sleep(0.3)
        made = Job.objects.filter(schedule=s).count()
        time.sleep(2.5)
        assert Job.objects.filter(schedule=s).count() == made


def test_burst_dispatcher_runs_a_due_schedule():
    from django.core.management import call_command

    s = schedules.create(name="due", task=NOOP, interval_seconds=3600, start_at=timezone.now() + timedelta(seconds=0.2))
    time.sleep(0.3)
    call_command("rundispatcher", "--burst")
    assert Job.objects.get(schedule=s).status == "succeeded"


@pytest.mark.postgres_only
@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 4])
def test_many_dispatcher_processes_make_exactly_one_job_per_run(count, tmp_path):
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    processes = [start_dispatcher("--concurrency", "2", log_path=log) for log in logs]
    try:
        # All of them are up and listening before the first run is due.
        assert wait_for(lambda: Worker.objects.filter(state="alive").count() == count, 60)
        time.sleep(0.5)
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
