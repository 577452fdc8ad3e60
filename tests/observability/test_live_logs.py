"""A running attempt's log records are written while it runs (``logflush``), from worker threads and
worker processes, and its end writes only the rest: none twice, ``logs_count`` right."""

import logging
import os
import signal
import subprocess

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobLog
from scheduler_app.observability import joblogs
from scheduler_app.observability.logflush import LogFlusher
from tests.plumbing import ROOT, dispatcher_thread, manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."


def messages(job):
    return list(JobLog.objects.filter(job=job).order_by("attempt", "seq").values_list("seq", "message"))


def live_then_released(job, marker_dir, lines, more, client=None, admin=None):
    """Wait for ``lines`` records of the running job, check what the API and the admin show, release it, check the end."""
    assert wait_for(lambda: JobLog.objects.filter(job=job).count() == lines, timeout=30)
    job.refresh_from_db()
    assert job.status == "running" and job.logs_count == lines
    assert messages(job) == [(i, f"line {i}") for i in range(1, lines + 1)]
    if client is not None:
        body = client.get(f"/api/jobs/{job.pk}/logs/?page_size=500").json()
        assert body["count"] == lines and [r["message"] for r in body["results"]][-1] == f"line {lines}"
    if admin is not None:
        page = admin.get(f"/admin/scheduler_app/job/{job.pk}/live/").json()
        assert page["logs_count"] == lines and f"line {lines}" in page["fields"]["logs_display"]
    open(os.path.join(marker_dir, "release"), "w").close()
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", timeout=30)
    job.refresh_from_db()
    total = lines + more
    assert messages(job) == [(i, f"line {i}") for i in range(1, total + 1)]  # none twice, none lost
    assert job.logs_count == total


def test_a_running_attempts_lines_appear_while_it_runs_on_a_worker_thread(marker_dir, api, client, superuser):
    client.force_login(superuser)
    job, _ = lifecycle.enqueue(T + "logs_then_waits", [marker_dir], {"lines": 150, "more": 3}, max_attempts=1)
    with dispatcher_thread():
        live_then_released(job, marker_dir, 150, 3, client=api, admin=client)


@override_settings(SCHEDULER={"JOB_LOG_MAX_RECORDS": 5})
def test_the_bound_holds_for_the_whole_attempt_and_the_dropped_line_comes_last(marker_dir):
    job, _ = lifecycle.enqueue(T + "logs_then_waits", [marker_dir], {"lines": 3, "more": 10}, max_attempts=1)
    with dispatcher_thread():
        assert wait_for(lambda: JobLog.objects.filter(job=job).count() == 3, timeout=30)
        open(os.path.join(marker_dir, "release"), "w").close()
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", timeout=30)
    rows = messages(job)
    assert [seq for seq, _ in rows] == [1, 2, 3, 4, 5, 6]
    assert [m for _, m in rows[:5]] == [f"line {i}" for i in range(1, 6)]
    assert rows[5][1].startswith("8 more records dropped")
    assert Job.objects.get(pk=job.pk).logs_count == 6


@pytest.mark.slow
def test_a_running_attempts_lines_appear_while_it_runs_in_a_worker_process(marker_dir):
    job, _ = lifecycle.enqueue(
        T + "logs_then_waits", [marker_dir], {"lines": 40, "more": 2}, queue="slow", max_attempts=1
    )
    cmd, env = manage("rundispatcher", "--poll-interval", "0.2", "--queue", "slow:1:process")
    process = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        live_then_released(job, marker_dir, 40, 2)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(60) == 0, process.stdout.read()
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def running_job(worker="w-1", attempts=1):
    now = timezone.now()
    return Job.objects.create(
        task=T + "noop",
        args=[],
        kwargs={},
        execute_at=now,
        status="running",
        worker=worker,
        attempts=attempts,
        started_at=now,
        last_attempted_at=now,
    )


def capture_of(job, worker="w-1", attempt=1, lines=2):
    capture = joblogs.Capture(logging.INFO, 100, 10_000, (job.pk, worker, attempt))
    for i in range(lines):
        capture.add(logging.LogRecord("t", logging.INFO, "", 0, "l %d \x00", (i + 1,), None))
    return capture


def test_one_write_for_many_attempts_and_only_for_the_running_attempt(django_assert_max_num_queries):
    ours, rescued = running_job(), running_job(attempts=2)
    mine, stale = capture_of(ours), capture_of(rescued, attempt=1)  # that attempt was taken back
    flusher = LogFlusher()
    flusher._captures.update({mine, stale})
    with django_assert_max_num_queries(4):  # SQLite: BEGIN, UPDATE, INSERT, COMMIT; PostgreSQL: one
        assert flusher.flush([mine, stale]) == 2
    assert messages(ours) == [(1, "l 1 \ufffd"), (2, "l 2 \ufffd")]  # storable, as the outcome's are
    assert not JobLog.objects.filter(job=rescued).exists() and Job.objects.get(pk=rescued.pk).logs_count == 0
    assert flusher._captures == {mine} and mine.flushed == 2
    assert flusher.flush([mine]) == 0  # nothing new: no statement
    mine.add(logging.LogRecord("t", logging.INFO, "", 0, "third", None, None))
    mine.close()
    assert flusher.flush([mine]) == 0  # closed: the outcome writes the rest
    assert [r[3] for r in mine.rows()] == ["third"] and Job.objects.get(pk=ours.pk).logs_count == 2


def test_the_outcome_numbers_its_records_after_those_written_live():
    from scheduler_app.lifecycle.finishing import log_rows
    from scheduler_app.vocabulary.jobs import Outcome

    outcome = Outcome(1, "w", 1, "succeeded", logs=((0.0, 20, "t", "c", ""),), logs_before=2)
    assert [row[2] for row in log_rows([outcome])] == [3]


def test_a_snoozed_runs_lines_are_followed_by_the_next_runs_under_the_same_attempt():
    # A snooze gives its attempt number back: the next run's records are numbered after the snoozed runs'.
    job, _ = lifecycle.enqueue(T + "chatty_snoozer", ["live-logs"], {"times": 2}, max_attempts=1)
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status not in ("pending", "running"), timeout=30)
    job.refresh_from_db()
    assert job.status == "succeeded", job.errors
    assert messages(job) == [(1, "run 1"), (2, "run 2"), (3, "run 3")] and job.logs_count == 3


def test_an_attempt_that_ends_without_a_write_does_not_wake_the_flusher():
    # Each attempt's end used to wake the flusher thread to close a connection it
    # never opened: a thread switch a job on the dispatcher's hot path.
    ours = running_job()
    flusher = LogFlusher()
    quiet = capture_of(ours, lines=0)
    flusher._captures.add(quiet)
    flusher.remove(quiet)
    assert not flusher._wake.is_set()
    # After a write the thread holds a connection: the last attempt's end wakes it to close it.
    written = capture_of(ours)
    flusher._captures.add(written)
    assert flusher.flush([written]) == 2
    flusher.remove(written)
    assert flusher._wake.is_set()
