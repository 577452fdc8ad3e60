"""Process-backed queues (``--queue NAME:SLOTS:process``): jobs run in reused worker
processes, so CPU-bound work runs in parallel, a timeout is hard, and a process that
dies fails only its attempt. Real dispatcher processes, real worker processes, kill -9."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ROOT, manage, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

T = "tests.testapp.tasks."


def run_burst(*args, timeout=120):
    cmd, env = manage("rundispatcher", "--burst", "--poll-interval", "0.2", *args)
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def start(*args):
    cmd, env = manage("rundispatcher", "--poll-interval", "0.2", *args, log_level="INFO")
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.returncode


def enqueue_burns(queue, jobs, iterations):
    lifecycle.enqueue_many(
        [
            {"task": T + "burn", "kwargs": {"iterations": iterations}, "queue": queue, "max_attempts": 1}
            for _ in range(jobs)
        ]
    )


@pytest.mark.once  # parallelism, restarts, logging: not the database's
def test_cpu_bound_jobs_on_process_slots_run_in_a_worker_process_per_slot():
    # Behaviour only: how much faster two process slots are than two thread
    # slots is measured by make bench ("process_queue"), never asserted in a test.
    enqueue_burns("other", 4, 300_000)
    done = run_burst("--queue", "other:2:process")
    results = list(Job.objects.filter(queue="other").values_list("status", "result"))
    assert {status for status, _ in results} == {"succeeded"}, results
    pids = {pid for _, (_, _, pid) in results}
    assert len(pids) == 2 and os.getpid() not in pids, done.stdout  # one reused worker per slot


def test_a_job_stuck_in_a_loop_is_killed_at_its_timeout_and_its_slot_runs_the_next_job(tmp_path):
    stuck, _ = lifecycle.enqueue(T + "spin", [str(tmp_path)], queue="slow", timeout=1, max_attempts=1, priority=10)
    after, _ = lifecycle.enqueue(T + "add", [2, 3], queue="slow", max_attempts=1)
    process = start("--queue", "slow:1:process")
    try:
        assert wait_for(lambda: Job.objects.get(pk=after.pk).status == "succeeded", timeout=60)
    finally:
        assert stop(process) == 0
    stuck.refresh_from_db()
    assert stuck.status == "failed"
    assert "timed out" in stuck.errors[-1]["message"].lower(), stuck.errors
    # Hard: failed within 2 s of its task's start (the worker's start-up does not
    # count), not whenever the loop might end.
    started = float((tmp_path / "spin-started").read_text())
    assert stuck.finished_at.timestamp() - started <= 2.0
    after.refresh_from_db()
    assert after.result == 5
    # The next job ran in a fresh process of the same slot, and no process was left behind.
    output = process.stdout.read()
    assert "killed its worker process" in output, output


def test_kill_9_of_a_worker_process_fails_only_that_attempt(tmp_path):
    victim, _ = lifecycle.enqueue(T + "pid_then_sleep", [str(tmp_path), "victim", 30], queue="slow", max_attempts=1)
    neighbour, _ = lifecycle.enqueue(
        T + "pid_then_sleep", [str(tmp_path), "neighbour", 2], queue="slow", max_attempts=1
    )
    retried, _ = lifecycle.enqueue(T + "pid_then_sleep", [str(tmp_path), "retried", 30], queue="other", max_attempts=2)
    process = start("--queue", "slow:2:process", "--queue", "other:1:process")
    try:
        pidfile = {name: tmp_path / f"pid-{name}" for name in ("victim", "neighbour", "retried")}
        assert wait_for(lambda: all(p.exists() and p.read_text() for p in pidfile.values()), timeout=60)
        pids = {name: int(path.read_text()) for name, path in pidfile.items()}
        assert len(set(pids.values()) | {process.pid}) == 4  # each in a process of its own
        pidfile["retried"].unlink()
        os.kill(pids["victim"], signal.SIGKILL)
        os.kill(pids["retried"], signal.SIGKILL)
        assert wait_for(lambda: Job.objects.get(pk=victim.pk).status == "failed", timeout=30)
        assert wait_for(lambda: Job.objects.get(pk=neighbour.pk).status == "succeeded", timeout=30)
        # The one with attempts left runs again, in a new process.
        assert wait_for(lambda: pidfile["retried"].exists() and pidfile["retried"].read_text(), timeout=60)
        second = int(pidfile["retried"].read_text())
        assert second != pids["retried"]
        os.kill(second, signal.SIGKILL)  # its last attempt
        assert wait_for(lambda: Job.objects.get(pk=retried.pk).status == "failed", timeout=30)
    finally:
        assert stop(process) == 0
    victim.refresh_from_db()
    assert victim.errors[-1]["exception_class"].endswith("WorkerProcessDied")
    assert "killed by SIGKILL" in victim.errors[-1]["message"], victim.errors
    neighbour.refresh_from_db()
    assert neighbour.result == pids["neighbour"]
    retried.refresh_from_db()
    assert retried.attempts == 2 and len(retried.errors) == 2
    assert not any(
        os.path.exists(f"/proc/{pid}") and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        for pid in [*pids.values(), second]
    ), "a worker process outlived its dispatcher"


def test_progress_and_cancel_cross_the_process_boundary():
    job, _ = lifecycle.enqueue(T + "progress_until_cancelled", queue="slow", max_attempts=1)
    process = start("--queue", "slow:1:process")
    try:
        assert wait_for(lambda: (Job.objects.get(pk=job.pk).progress or {}).get("current") == 1, timeout=60)
        job.refresh_from_db()
        assert job.progress["message"] != f"pid {process.pid}"  # reported from the worker process
        lifecycle.cancel(job.pk)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "cancelled", timeout=30)
    finally:
        assert stop(process) == 0


def test_a_jobs_own_log_lines_are_kept_from_its_worker_process():
    from scheduler_app.models.observability import JobLog

    job, _ = lifecycle.enqueue(T + "chatty", kwargs={"lines": 2}, queue="slow", max_attempts=1)
    run_burst("--queue", "slow:1:process")
    job.refresh_from_db()
    assert job.status == "succeeded" and job.logs_count == 2
    assert list(JobLog.objects.filter(job=job).order_by("seq").values_list("message", flat=True)) == [
        "line 1 of 2",
        "line 2 of 2",
    ]


def test_the_setting_makes_a_queue_run_in_processes_and_the_banner_says_so(settings, monkeypatch):
    from django.db import connection

    # The worker processes set Django up from the settings module: the test database by name.
    monkeypatch.setenv("SCHEDULER_TEST_DB_NAME", str(connection.settings_dict["NAME"]))
    settings.SCHEDULER = {**settings.SCHEDULER, "QUEUES": {"slow": {"mode": "process"}}}
    job, _ = lifecycle.enqueue(
        T + "pid_then_sleep", ["/tmp", f"setting-{os.getpid()}", 0], queue="slow", max_attempts=1
    )
    other, _ = lifecycle.enqueue(T + "add", [1, 2], queue="default", max_attempts=1)
    from tests.plumbing import manage_in_process

    code, out, err = manage_in_process("rundispatcher", "--burst")
    assert code in (0, None), err
    assert "in worker processes: slow" in out, out
    job.refresh_from_db()
    other.refresh_from_db()
    assert job.status == "succeeded" and job.result != os.getpid()  # ran in another process
    assert other.status == "succeeded"
