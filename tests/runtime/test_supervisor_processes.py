"""rundispatcher --processes N: a supervisor runs N dispatcher processes, restarts one that
dies, passes SIGTERM on, and exits 0 when all have stopped. Real processes, real signals."""

import os
import re
import signal
import subprocess
import time

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job, Worker
from tests.plumbing import ROOT, manage, markers, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECORD = "tests.testapp.tasks.record"


def start(*args, **env):
    cmd, environment = manage("rundispatcher", *args, log_level="INFO", **env)
    return subprocess.Popen(cmd, env=environment, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def banner(process):
    line = process.stdout.readline()
    match = re.search(r"supervisor (\d+) \| (\d+) dispatcher processes \(pids ([\d, ]+)\)", line)
    assert match, line
    return int(match.group(1)), [int(p) for p in match.group(3).split(", ")]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) is not running.
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def test_burst_with_two_processes_runs_every_job_once(marker_dir):
    lifecycle.enqueue_many([{"task": RECORD, "args": [marker_dir, str(i)]} for i in range(60)])
    process = start("--processes", "2", "--concurrency", "2", "--burst")
    supervisor_pid, children = banner(process)
    assert supervisor_pid == process.pid and len(children) == 2
    assert process.wait(120) == 0
    assert Job.objects.filter(status="succeeded").count() == 60
    assert set(markers(marker_dir).values()) == {1}
    # Each child is a dispatcher of its own, with its Worker row.
    assert Worker.objects.filter(pid__in=children).count() == 2


@pytest.mark.once  # parallelism, restarts, logging: not the database's
def test_a_child_that_dies_is_restarted_and_sigterm_stops_them_all(marker_dir):
    process = start("--processes", "2", "--concurrency", "1", "--poll-interval", "0.2")
    try:
        _, (first, second) = banner(process)
        assert wait_for(lambda: Worker.objects.filter(pid__in=[first, second], state="alive").count() == 2, timeout=60)
        os.kill(first, signal.SIGKILL)
        assert wait_for(
            lambda: Worker.objects.filter(state="alive").exclude(pid__in=[first, second]).exists(), timeout=60
        )
        replacement = Worker.objects.filter(state="alive").exclude(pid__in=[first, second]).get().pid
        # It works as a dispatcher: a job enqueued now runs.
        job, _ = lifecycle.enqueue(RECORD, [marker_dir, "after-restart"])
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", timeout=60)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        output = process.stdout.read()
        assert f"(pid {first}) exited with signal SIGKILL" in output and "restarting in 1.0s" in output
        assert not alive(second) and not alive(replacement)
        assert Worker.objects.filter(pid__in=[second, replacement], state="stopped").count() == 2
    finally:
        if process.poll() is None:
            process.kill()


def catches_sigterm(pid):
    """Whether ``pid`` has a handler for SIGTERM (its SigCgt mask in /proc)."""
    with open(f"/proc/{pid}/status") as fh:
        caught = next(line for line in fh if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("delay", [0.0, 0.3, 1.5])
def test_sigterm_while_starting_exits_0(delay):
    process = start("--processes", "2")
    # From the moment manage.py holds the signals (before Django is set up):
    # before it, the interpreter itself is starting and nothing can hold one.
    assert wait_for(lambda: catches_sigterm(process.pid), timeout=30, interval=0.005)
    time.sleep(delay)
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, process.stdout.read()


@pytest.mark.once  # signals and processes: not the database's
def test_sigint_is_passed_on_like_sigterm_and_a_second_one_stops_the_children_at_once():
    # A child busy with a long job: the first SIGINT asks it to finish (--grace 30),
    # the second makes it stop at once; the supervisor still exits 0.
    job, _ = lifecycle.enqueue("tests.testapp.tasks.blocker", kwargs={"seconds": 60})
    process = start("--processes", "2", "--concurrency", "1", "--grace", "30", "--poll-interval", "0.2")
    try:
        _, children = banner(process)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "running", timeout=60)
        process.send_signal(signal.SIGINT)
        # The idle child stops; the busy one waits for its job (its grace is 30 s).
        assert wait_for(lambda: sum(alive(pid) for pid in children) == 1, timeout=30)
        assert process.poll() is None
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        assert time.monotonic() - started < 20
        assert not any(alive(pid) for pid in children)
    finally:
        if process.poll() is None:
            process.kill()
