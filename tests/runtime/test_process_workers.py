"""Worker processes of process-mode queues (invariant 14): they die with their dispatcher, and so
does what their task started; they are gone before a release commits; a timeout counts from the
task's own start; an attempt that ended the wrong way says how. Real dispatcher processes, real
worker processes, real signals."""

import os
import signal
import subprocess
import threading

import psutil
import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.runtime.processes import ProcessExecutor
from scheduler_app.runtime.wiring import retry_policy
from tests.dispatcher.fake_executor import claimed_job
from tests.plumbing import ROOT, dispatcher_thread, log_tail, manage, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

T = "tests.testapp.tasks."


def gone(pid):
    """Return whether process ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def family_pids(path, log):
    """Wait for a ``family`` task's pid file; return ``(worker pid, its child's pid)``."""
    assert wait_for(path.exists, timeout=60), log_tail(log)
    worker, child = (int(pid) for pid in path.read_text().split())
    assert not gone(worker) and not gone(child)
    return worker, child


def kill(process):
    if process.poll() is None:
        process.kill()
        process.wait(10)


def run_burst(*args, **env):
    cmd, environment = manage("rundispatcher", "--burst", "--poll-interval", "0.2", *args, **env)
    done = subprocess.run(cmd, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_kill_9_of_the_dispatcher_takes_its_worker_processes_and_what_their_tasks_started(tmp_path):
    for name in ("a", "b"):
        lifecycle.enqueue(T + "family", [str(tmp_path), name, 60], queue="slow", max_attempts=1)
    log = tmp_path / "d.log"
    process = start_dispatcher("--queue", "slow:2:process", log_path=log)
    try:
        pids = [*family_pids(tmp_path / "pids-a", log), *family_pids(tmp_path / "pids-b", log)]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        # A hang guard, not a timing assertion: the old code left them running their minute.
        assert wait_for(lambda: all(gone(pid) for pid in pids), timeout=10), [pid for pid in pids if not gone(pid)]
    finally:
        kill(process)


def test_at_the_end_of_the_grace_the_worker_and_what_its_task_started_are_gone_before_the_release(tmp_path):
    job, _ = lifecycle.enqueue(T + "family", [str(tmp_path), "a", 60], queue="slow", max_attempts=1)
    log = tmp_path / "d.log"
    process = start_dispatcher("--queue", "slow:1:process", "--grace", "0.3", "--poll-interval", "0.2", log_path=log)
    try:
        worker, child = family_pids(tmp_path / "pids-a", log)
        process.send_signal(signal.SIGTERM)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).lease_expires_at is None, timeout=30), log_tail(log)
        # Handed back: nothing of this attempt runs, and its process is yet to end.
        assert gone(worker) and gone(child), (gone(worker), gone(child))
        assert process.wait(30) == 0, log_tail(log)
    finally:
        kill(process)
    assert lifecycle.take_back() == (1, 0)
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("pending", 0)


def test_a_timeout_counts_from_the_tasks_own_start_not_from_the_workers_start_up(tmp_path):
    # Each worker process takes a second longer to set Django up than the jobs' timeout.
    fresh, _ = lifecycle.enqueue(T + "deadline_seen", [0.3], queue="slow", timeout=1, max_attempts=1, priority=30)
    stuck, _ = lifecycle.enqueue(
        T + "pid_then_sleep", [str(tmp_path), "stuck", 5], queue="slow", timeout=1, max_attempts=1, priority=20
    )
    after, _ = lifecycle.enqueue(T + "deadline_seen", [0.3], queue="slow", timeout=1, max_attempts=1, priority=10)
    output = run_burst("--queue", "slow:1:process", SCHEDULER_TEST_WORKER_SETUP_DELAY="1.0")
    for job in (fresh, stuck, after):
        job.refresh_from_db()
    # On a fresh slot, and on the slot whose worker the timeout just killed.
    for job in (fresh, after):
        assert job.status == "succeeded", job.errors
        started, deadline, left = job.result
        assert 0 < deadline - started <= 1.0 and 0 < left <= 1.0, job.result  # the task's context agrees
    assert stuck.status == "failed" and "Timed out after 1s" in stuck.errors[-1]["message"], stuck.errors
    pid = int((tmp_path / "pid-stuck").read_text())
    assert f"killed its worker process (pid {pid}) at its timeout" in output, output
    assert gone(pid)


def test_an_attempt_that_ended_the_wrong_way_says_how_in_a_process_and_on_a_thread():
    def enqueue(queue, priority, task="exits", args=(), **kwargs):
        return lifecycle.enqueue(T + task, list(args), kwargs, queue=queue, max_attempts=1, priority=priority)[0]

    in_process = {
        "sys.exit": enqueue("slow", 40, how="sys.exit"),
        "os._exit": enqueue("slow", 30, how="os._exit"),
        "kill": enqueue("slow", 20, how="kill"),
    }
    on_thread = enqueue("default", 40, how="sys.exit")
    afterwards = [enqueue("slow", 10, "add", [2, 3]), enqueue("default", 10, "add", [2, 3])]
    run_burst("--queue", "slow:1:process", "--queue", "default:1")
    errors = {name: Job.objects.get(pk=job.pk).errors for name, job in in_process.items()}
    for error in (errors["sys.exit"], Job.objects.get(pk=on_thread.pk).errors):
        assert len(error) == 1 and error[0]["exception_class"] == "builtins.SystemExit", error
        assert error[0]["message"] == "The task called sys.exit(3).", error
        assert "sys.exit(code)" in error[0]["traceback"], error  # the task's own line
    assert errors["os._exit"][0]["exception_class"].endswith("WorkerProcessDied")
    assert "ended with exit code 3 before it returned" in errors["os._exit"][0]["message"], errors
    assert "was killed by SIGKILL before it returned" in errors["kill"][0]["message"], errors
    # Neither the worker process's slot nor the thread was lost.
    assert [Job.objects.get(pk=job.pk).result for job in afterwards] == [5, 5]
    assert set(Job.objects.filter(pk__in=[j.pk for j in in_process.values()]).values_list("status", flat=True)) == {
        "failed"
    }


def test_a_worker_process_outlives_the_slot_thread_that_first_used_it(tmp_path, monkeypatch):
    # Linux sends the parent-death signal when the *thread* that started a process ends: a
    # worker started by a slot thread would die when that thread is abandoned to a timeout.
    monkeypatch.setenv("SCHEDULER_TEST_DB_NAME", str(connection.settings_dict["NAME"]))
    groups = {"*": ({"default", "slow"}, 1)}  # one slot, thread and process jobs alike
    with dispatcher_thread(groups, process_queues={"slow"}):
        first, _ = lifecycle.enqueue(T + "pid_then_sleep", [str(tmp_path), "first", 0], queue="slow", max_attempts=1)
        assert wait_for(lambda: Job.objects.get(pk=first.pk).status == "succeeded", timeout=60)
        slot_threads = [t for t in threading.enumerate() if t.name.startswith("scheduler-*-")]
        assert len(slot_threads) == 1
        stuck, _ = lifecycle.enqueue(T + "sleeper", [1.0], queue="default", timeout=0.2, max_attempts=1)
        assert wait_for(lambda: Job.objects.get(pk=stuck.pk).status == "failed", timeout=30)
        assert wait_for(lambda: not slot_threads[0].is_alive(), timeout=30)  # abandoned, and ended
        third, _ = lifecycle.enqueue(T + "pid_then_sleep", [str(tmp_path), "third", 0], queue="slow", max_attempts=1)
        assert wait_for(lambda: Job.objects.get(pk=third.pk).status == "succeeded", timeout=60)
    first.refresh_from_db()
    third.refresh_from_db()
    assert third.result == first.result  # the same worker process, alive after its first thread ended


@pytest.mark.once  # no database: the executor alone, with real processes
def test_a_worker_process_that_does_not_start_in_time_is_killed_and_its_attempt_retried(monkeypatch):
    def worker_processes():
        return {
            child.pid
            for child in psutil.Process().children()
            if "spawn_main" in " ".join(child.cmdline()) and not gone(child.pid)
        }

    monkeypatch.setenv("SCHEDULER_TEST_WORKER_SETUP_DELAY", "30")  # its Django setup never ends in time
    executor = ProcessExecutor(retry_policy(), "tests.settings", start_timeout=0.5)
    job = claimed_job(1, timeout=1, max_attempts=2)
    others = worker_processes()
    try:
        outcome = executor(job, threading.Event(), None)
        # Its replacement is starting (a spawned process shows spawn_main once it has exec'd).
        wait_for(lambda: len(worker_processes() - others) == 1, timeout=10)
        workers = worker_processes() - others
    finally:
        executor.close()
    assert outcome.status == "pending" and outcome.retry_at is not None  # retried: not the task's doing
    assert outcome.error["exception_class"].endswith("WorkerProcessDidNotStart")
    assert outcome.error["message"] == "The worker process did not start within 0.5s; it was killed."
    assert len(workers) == 1  # its replacement (starting); the one that did not start is gone
    assert wait_for(lambda: all(gone(pid) for pid in workers), timeout=10)  # and close() ended that one


@pytest.mark.once  # no database: the executor alone, with real processes
def test_an_attempt_whose_lease_ran_out_has_its_worker_killed_and_the_slot_goes_on(tmp_path):
    # The loop's LeaseWatch calls stop_attempts for attempts whose leases it could
    # not renew (the database is gone): another dispatcher may soon rescue them.
    import dataclasses

    executor = ProcessExecutor(retry_policy(), "tests.settings")
    job = dataclasses.replace(claimed_job(1, max_attempts=3), task=T + "family", args=[str(tmp_path), "lost", 30.0])
    outcomes = []
    runner = threading.Thread(target=lambda: outcomes.append(executor(job, threading.Event(), None)))
    runner.start()
    try:
        worker, child = family_pids(tmp_path / "pids-lost", tmp_path / "none")
        assert executor.stop_attempts([job]) == 1
        runner.join(30)
        assert gone(worker) and wait_for(lambda: gone(child), timeout=10)
        (outcome,) = outcomes
        assert outcome.status == "pending" and outcome.error["exception_class"].endswith("WorkerProcessDied")
        after = dataclasses.replace(claimed_job(2), task=T + "add", args=[2, 3])
        assert executor(after, threading.Event(), None).result_json == "5"  # the slot goes on, a fresh worker
    finally:
        executor.close()
