"""A task that forks (issue 34, section 3): its child never speaks for the slot and never
outlives the attempt, and the queue keeps running. Real dispatcher processes, real forks, a
process queue and a thread queue."""

import contextlib
import os
import signal
import subprocess

import psutil
import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import log_tail, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

T = "tests.testapp.tasks."
FINISHED = {"succeeded", "failed", "cancelled"}


def gone(pid):
    """Return whether process ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def child_pid(tmp_path, name, log):
    path = tmp_path / f"child-{name}"
    assert wait_for(path.exists, timeout=60), log_tail(log)
    return int(path.read_text())


def stop(process, log):
    """SIGTERM ``process`` and return its exit code (killed after a hang guard)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise AssertionError(f"the dispatcher did not stop on SIGTERM\n{log_tail(log)}") from None
    return process.returncode


# Forking jobs: (task, kwargs, the parent's result).
FORKING = {
    # The child comes back out of the task at once: it exits 0 by itself, and the parent sees it.
    "returns": ("forks", {"wait": True}, 0),
    "exits": ("forks", {"child_exit": 3, "wait": True}, 3),  # sys.exit(3) in the child
    "async": ("async_forks", {}, 0),  # forked on asgiref's loop thread
    # The child still runs the task when the parent returns.
    "lingers": ("forks", {"child_seconds": 60.0}, "parent"),
}


def forks_then_plain_jobs(tmp_path, queue_option):
    """Run forking jobs between plain ones on a 2-slot queue; check each job and each child; return the children."""
    jobs, expected = {}, {}
    for n, (name, (task, kwargs, result)) in enumerate(FORKING.items()):
        jobs[name] = lifecycle.enqueue(T + task, [str(tmp_path), name], kwargs, queue="slow", priority=90 - 20 * n)[0]
        expected[name] = result
        for i in range(3):  # plain jobs behind each forking one
            plain = f"{name}+{i}"
            jobs[plain] = lifecycle.enqueue(T + "add", [n, i], queue="slow", priority=80 - 20 * n - i)[0]
            expected[plain] = n + i
    log = tmp_path / "dispatcher.log"
    process = start_dispatcher("--queue", queue_option, "--poll-interval", "0.2", log_path=log)
    ids = [job.pk for job in jobs.values()]
    try:
        children = {name: child_pid(tmp_path, name, log) for name in FORKING}
        # A hang guard, not a timing assertion: before the fix the last job stayed running.
        assert wait_for(
            lambda: set(Job.objects.filter(pk__in=ids).values_list("status", flat=True)) <= FINISHED, timeout=60
        ), (dict(Job.objects.filter(pk__in=ids).values_list("id", "status")), log_tail(log))
        # Each child is gone once its attempt is over (killed if it was still running the task).
        assert [name for name, pid in children.items() if not gone(pid)] == [], log_tail(log)
        assert stop(process, log) == 0, log_tail(log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    for name, job in jobs.items():
        job.refresh_from_db()
        # The parent's result, from the first attempt: no child's result, no second run.
        assert (job.status, job.result, job.attempts) == ("succeeded", expected[name], 1), (
            name,
            job.errors,
            log_tail(log),
        )
    return children


def test_a_task_that_forks_in_a_process_queue_leaves_the_slot_to_its_worker(tmp_path):
    forks_then_plain_jobs(tmp_path, "slow:2:process")


def test_a_task_that_forks_in_a_thread_queue_leaves_no_copy_of_the_dispatcher(tmp_path):
    forks_then_plain_jobs(tmp_path, "slow:2")


def test_what_a_task_leaves_running_in_a_process_queue_ends_with_its_attempt(tmp_path):
    left, _ = lifecycle.enqueue(T + "leaves_behind", [str(tmp_path), "a"], queue="slow", priority=10)
    after, _ = lifecycle.enqueue(T + "add", [2, 3], queue="slow")
    log = tmp_path / "dispatcher.log"
    process = start_dispatcher("--queue", "slow:1:process", "--poll-interval", "0.2", log_path=log)
    child = orphan = None
    try:
        path = tmp_path / "left-a"
        assert wait_for(path.exists, timeout=60), log_tail(log)
        child, orphan = (int(pid) for pid in path.read_text().split())
        assert wait_for(lambda: Job.objects.get(pk=left.pk).status == "succeeded", timeout=60), log_tail(log)
        # Its own child, and the orphan in a session of its own that the worker adopted.
        assert gone(child) and gone(orphan), (gone(child), gone(orphan))
        assert wait_for(lambda: Job.objects.get(pk=after.pk).status == "succeeded", timeout=60), log_tail(log)
        assert stop(process, log) == 0, log_tail(log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        for pid in filter(None, (child, orphan)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # the old code left them: do not leave them to the machine


def test_a_forked_child_in_a_thread_queue_ends_on_sigterm_and_with_its_dispatcher(tmp_path):
    # Both attempts still run (the parents sleep): only the signals can end the children.
    for name in ("term", "orphan"):
        lifecycle.enqueue(T + "forks", [str(tmp_path), name, 60.0, 60.0], queue="slow", max_attempts=1)
    log = tmp_path / "dispatcher.log"
    process = start_dispatcher("--queue", "slow:2", "--poll-interval", "0.2", log_path=log)
    try:
        term, orphan = child_pid(tmp_path, "term", log), child_pid(tmp_path, "orphan", log)
        os.kill(term, signal.SIGTERM)  # a copy of the dispatcher's handler would only set a flag
        assert wait_for(lambda: gone(term), timeout=10), log_tail(log)
        assert not gone(orphan)
        process.kill()  # kill -9: no handler, no at-exit code runs in the dispatcher
        process.wait(10)
        assert wait_for(lambda: gone(orphan), timeout=10), log_tail(log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
