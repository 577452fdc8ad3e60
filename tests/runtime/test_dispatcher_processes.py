"""Dispatcher processes: many at once, kill -9, SIGTERM. Real processes, real signals."""

import os
import signal

import pytest
from django.db.models import Count

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import log_tail, manage_in_process, markers, run_manage, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECORD = "tests.testapp.tasks.record"


def status_counts():
    return dict(Job.objects.values_list("status").annotate(n=Count("id")).order_by())


def enqueue_records(marker_dir, count, **spec):
    for start in range(0, count, 1000):
        lifecycle.enqueue_many(
            [{"task": RECORD, "args": [marker_dir, str(i)], **spec} for i in range(start, min(start + 1000, count))]
        )


def stop(processes, sig=signal.SIGTERM):
    for p in processes:
        if p.poll() is None:
            p.send_signal(sig)
    return [p.wait(60) for p in processes]


@pytest.mark.postgres_only
@pytest.mark.parametrize("count", [2, 4])
def test_many_dispatchers_share_5000_jobs_and_run_each_exactly_once(marker_dir, count, tmp_path):
    enqueue_records(marker_dir, 5000)
    logs = [tmp_path / f"d{i}.log" for i in range(count)]
    processes = [start_dispatcher("--concurrency", "4", "--burst", log_path=log) for log in logs]
    try:
        codes = [p.wait(300) for p in processes]
    finally:
        stop(processes, signal.SIGKILL)
    assert codes == [0] * count, [log_tail(log) for log in logs]
    assert status_counts() == {"succeeded": 5000}
    runs = markers(marker_dir)
    assert len(runs) == 5000 and set(runs.values()) == {1}
    # More than one dispatcher did real work.
    assert Job.objects.order_by().values("worker").distinct().count() > 1


def test_kill_9_mid_run_loses_nothing(marker_dir, tmp_path):
    enqueue_records(marker_dir, 200, max_attempts=3)
    victim = start_dispatcher(
        "--concurrency", "4", "--lease", "3", log_path=tmp_path / "victim.log", SCHEDULER_TEST_RECORD_SLEEP="0.02"
    )
    try:
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() >= 40, 60), log_tail(
            tmp_path / "victim.log"
        )
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        in_flight = Job.objects.filter(status="running").count()
        assert in_flight <= 4
        rescuer = start_dispatcher(
            "--concurrency", "4", "--lease", "3", "--poll-interval", "0.2", log_path=tmp_path / "rescuer.log"
        )
        try:
            assert wait_for(lambda: status_counts() == {"succeeded": 200}, 120), status_counts()
        finally:
            assert stop([rescuer]) == [0], log_tail(tmp_path / "rescuer.log")
    finally:
        stop([victim], signal.SIGKILL)
    runs = markers(marker_dir)
    assert set(runs) == set(Job.objects.values_list("pk", flat=True))
    duplicates = sum(n - 1 for n in runs.values())
    # Only jobs that were in flight at the kill can have run twice.
    assert duplicates <= in_flight
    assert Job.objects.filter(attempts=2).count() == in_flight


def test_sigterm_lets_running_jobs_finish_within_grace(tmp_path):
    jobs = [lifecycle.enqueue("tests.testapp.tasks.sleeper", [1.0])[0] for _ in range(2)]
    log = tmp_path / "d.log"
    process = start_dispatcher("--concurrency", "2", "--grace", "10", log_path=log, log_level="INFO")
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").count() == 2, 30)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log_tail(log)
    finally:
        stop([process], signal.SIGKILL)
    assert "stopping: 2 running jobs get 10.0s" in log.read_text()  # the stop found them running
    statuses = set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True))
    assert statuses == {"succeeded"}


def test_sigterm_past_grace_releases_unfinished_jobs_to_pending(tmp_path):
    # The job outlasts any wait below: a dispatcher that waited for it would
    # time out there; one that let it finish would leave it succeeded.
    job = lifecycle.enqueue("tests.testapp.tasks.sleeper", [3600.0])[0]
    process = start_dispatcher("--concurrency", "1", "--grace", "0.5", log_path=tmp_path / "d.log")
    try:
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "running", 30)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log_tail(tmp_path / "d.log")
    finally:
        stop([process], signal.SIGKILL)
    job.refresh_from_db()
    # Handed back at the end of its grace, visibly; the next dispatcher (or any other) takes it back
    # once the process is gone, the attempt not counted.
    assert (job.status, job.attempts, job.lease_expires_at) == ("running", 1, None)
    assert job.errors[-1]["exception_class"] == "scheduler_app.lifecycle.ReleasedAtShutdown"
    assert lifecycle.take_back() == (1, 0)
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("pending", 0)


def test_second_signal_exits_at_once(tmp_path):
    lifecycle.enqueue("tests.testapp.tasks.sleeper", [3600.0])
    log = tmp_path / "d.log"
    process = start_dispatcher("--concurrency", "1", "--grace", "60", log_path=log, log_level="INFO")
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").exists(), 30)
        process.send_signal(signal.SIGINT)
        # The first signal began the graceful stop: the loop says so and waits for the job.
        assert wait_for(lambda: "stopping: 1 running jobs get 60.0s" in log.read_text(), 30), log_tail(log)
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        assert process.wait(10) != 0  # within the 60 s grace, and long before the job ends
    finally:
        stop([process], signal.SIGKILL)


def test_bad_arguments_are_one_line_errors_with_exit_code_2():
    result = run_manage("rundispatcher", "--queue", "nope", timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    # The others through the same command line, in this process (no interpreter to start).
    for args in (["--concurrency", "0"], ["--queue", "default:x"], ["--lease", "-1"]):
        code, _, stderr = manage_in_process("rundispatcher", *args)
        assert code == 2, (args, stderr)
        assert stderr and "Traceback" not in stderr
