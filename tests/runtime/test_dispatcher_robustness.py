"""The dispatcher survives what it cannot read, obeys a pause from its commit, hears a cancel
from another process at once, and stops cleanly on a signal from its first moment.

Issue #11: items 0, 8, 9 and 11 of "Behaviour defects".
"""

import os
import signal
import subprocess
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ROOT, dispatcher_thread, manage, start_dispatcher, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"


def plant(**columns):
    """Create a job far in the future, then set ``columns`` with raw SQL (around every rule)."""
    job, _ = lifecycle.enqueue(ADD, [1, 2], execute_at=timezone.now() + timedelta(days=1))
    assignments = ", ".join(f"{name} = {value}" for name, value in columns.items())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE scheduler_app_job SET {assignments}, updated_at = %s WHERE id = %s", [timezone.now(), job.pk]
        )
    return job.pk


def status(job_id):
    return Job.objects.filter(pk=job_id).values_list("status", flat=True).first()


def test_rows_written_around_the_service_cannot_stop_the_dispatcher(caplog):
    pg = connection.vendor == "postgresql"
    with dispatcher_thread(poll_interval=0.05) as dispatcher:
        future = plant(execute_at="'10000-01-01 00:00:00+00'" if pg else "'10000-01-01 00:00:00'")
        planted = [
            future,
            plant(execute_at="'2000-01-01 00:00:00'", args="'{\"a\": 1}'"),
            plant(execute_at="'2000-01-01 00:00:00'", kwargs="'[1]'"),
            plant(execute_at="'2000-01-01 00:00:00'", task="'no.such.task'"),
            # The empty ones swapped: the claim reads "[]" and "{}" without a parse.
            plant(execute_at="'2000-01-01 00:00:00'", args="'{}'"),
            plant(execute_at="'2000-01-01 00:00:00'", kwargs="'[]'"),
        ]
        bad_args, bad_kwargs, unknown, empty_object_args, empty_list_kwargs = planted[1:]
        if pg:
            # Due, but before year 1: Python has no datetime for it.
            ancient = plant(execute_at="'0001-01-01 00:00:00+00 BC'")
            # A change time from the far future must not blind the change poll.
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE scheduler_app_job SET updated_at = '10000-01-01 00:00:00+00' WHERE id = %s", [future]
                )
        else:
            ancient = plant(execute_at="'garbage'")  # SQLite keeps any text; never due, never read
        # The due rows it cannot read fail one by one; the dispatcher goes on with the next.
        unreadable = (bad_args, bad_kwargs, unknown, empty_object_args, empty_list_kwargs)
        assert wait_for(lambda: all(status(j) == "failed" for j in unreadable), timeout=30)
        good = [lifecycle.enqueue(ADD, [i, i])[0].pk for i in range(5)]
        assert wait_for(lambda: all(status(j) == "succeeded" for j in good), timeout=30)
        # PostgreSQL: never due. SQLite compares its text: '10000-...' sorts
        # before '2026-...', so a claim by query may take it and simply run
        # it (its time reads as none); either way nothing breaks (and a run ends).
        assert wait_for(lambda: status(future) != "running", timeout=30)
        assert status(future) in (("pending",) if pg else ("pending", "succeeded"))
        assert status(ancient) in ("succeeded" if pg else "pending",)
        # And it goes on: a job enqueued after all that still runs.
        later, _ = lifecycle.enqueue(ADD, [7, 8])
        assert wait_for(lambda: status(later.pk) == "succeeded", timeout=30)
        assert not dispatcher.finished
    errors = {j: Job.objects.get(pk=j).errors[-1]["message"] for j in unreadable}
    for job in (bad_args, empty_object_args):
        assert errors[job] == "The job's stored args (a JSON list) cannot be read."
    for job in (bad_kwargs, empty_list_kwargs):
        assert errors[job] == "The job's stored kwargs (a JSON object) cannot be read."
    assert "is not a registered task" in errors[unknown]
    assert "unexpected error" not in caplog.text


def test_an_unexpected_error_in_a_tick_is_logged_and_retried(caplog, monkeypatch):
    """A bug in a tick backs off and tries again; it never ends the loop silently."""
    from scheduler_app.runtime import store

    calls = {"n": 0}
    paused = store.DjangoStore.paused_queues

    def broken(self):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise KeyError("a bug")
        return paused(self)

    monkeypatch.setattr(store.DjangoStore, "paused_queues", broken)
    with dispatcher_thread(pause_interval=0.01) as dispatcher:
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        assert wait_for(lambda: status(job.pk) == "succeeded", timeout=30)
        assert not dispatcher.finished
    assert "unexpected error in the dispatcher loop" in caplog.text and "KeyError" in caplog.text


def test_after_a_pause_returns_no_claim_starts_from_that_queue(marker_dir):
    """Another process pauses (as the web server does): the claim itself refuses the queue."""
    process = start_dispatcher("--concurrency", "2", "--poll-interval", "0.05")
    try:
        first, _ = lifecycle.enqueue(ADD, [0, 0], queue="slow")
        assert wait_for(lambda: status(first.pk) == "succeeded", timeout=60)
        for attempt in range(5):
            lifecycle.pause_queue("slow")
            job, _ = lifecycle.enqueue(ADD, [attempt, 1], queue="slow")
            # Two later jobs of another queue run, each claimed after the paused one was due:
            # a claim takes due jobs oldest first, so one that ignored the pause took it before them.
            for n in (2, 3):
                other, _ = lifecycle.enqueue(ADD, [attempt, n], queue="default")
                assert wait_for(lambda other=other: status(other.pk) == "succeeded", timeout=30)
            assert status(job.pk) == "pending", f"ran while its queue was paused (try {attempt})"
            lifecycle.resume_queue("slow")
            assert wait_for(lambda job=job: status(job.pk) == "succeeded", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0


def test_a_cancel_from_another_process_reaches_the_running_task_at_once(marker_dir):
    """PostgreSQL: the NOTIFY; SQLite: the data_version check that also reads cancel requests.

    Without it the flag arrives with the next heartbeat: lease/3, 20 minutes
    here, far past the wait below; so the task seeing it at all is the proof.
    """
    process = start_dispatcher("--concurrency", "1", "--lease", "3600")
    try:
        job, _ = lifecycle.enqueue("tests.testapp.tasks.cancel_stamp", [marker_dir])
        started = os.path.join(marker_dir, "started")
        assert wait_for(lambda: os.path.exists(started), timeout=60)
        assert lifecycle.cancel(job.pk) == "cancel_requested"
        seen = os.path.join(marker_dir, "cancel-seen")
        assert wait_for(lambda: os.path.exists(seen), timeout=60)
        assert wait_for(lambda: status(job.pk) == "cancelled", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0


def catches_sigterm(pid):
    """Return whether process ``pid`` has a handler for SIGTERM (Linux: SigCgt in /proc; elsewhere: after 0.25 s)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            caught = next(line for line in status if line.startswith("SigCgt:"))
    except FileNotFoundError:
        time.sleep(0.25)
        return True
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.4, 0.8, 1.5])
def test_sigterm_at_any_moment_of_the_start_exits_0(delay):
    """From the first moment the command's code runs (manage.py, before Django starts), a SIGTERM is a graceful stop."""
    cmd, env = manage("rundispatcher", "--concurrency", "1")
    process = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # manage.py installs the handler first thing; the interpreter's own
        # start comes before any code of ours (tens of ms, seconds on a loaded
        # machine): the delays under test begin once the process catches SIGTERM.
        assert wait_for(lambda: catches_sigterm(process.pid), timeout=60)
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, process.stdout.read()
