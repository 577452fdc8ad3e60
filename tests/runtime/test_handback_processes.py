"""A deploy and a pause never run a job twice at once (invariant 14). Real processes, real signals.

Overlaps are read from the tasks' own records (``ticker``: a line every 20 ms),
not from the jobs table.
"""

import signal

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.vocabulary.policy import LEASE_EXPIRED_CLASS, RELEASED_CLASS
from tests.plumbing import kill_and_wait, log_tail, overlapping_runs, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TICKER = "tests.testapp.tasks.ticker"


def test_a_rolling_restart_runs_no_thread_job_twice_at_once(tmp_path):
    """SIGTERM of one dispatcher while another runs on: jobs that outlive the grace run again, never beside."""
    jobs = [lifecycle.enqueue(TICKER, [str(tmp_path), 1.5], max_attempts=1)[0] for _ in range(3)]
    first = start_dispatcher("--concurrency", "3", "--grace", "0.2", "--lease", "5", log_path=tmp_path / "a.log")
    second = None
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").count() == 3, 30), log_tail(tmp_path / "a.log")
        second = start_dispatcher("--concurrency", "3", "--lease", "5", log_path=tmp_path / "b.log")
        first.send_signal(signal.SIGTERM)
        assert first.wait(30) == 0, log_tail(tmp_path / "a.log")
        done = lambda: Job.objects.filter(status="succeeded").count() == 3  # noqa: E731
        assert wait_for(done, 60), (log_tail(tmp_path / "b.log"), list(Job.objects.values("status", "errors")))
    finally:
        kill_and_wait(first, *([second] if second else []))
    assert overlapping_runs(tmp_path) == []
    for job in jobs:
        job.refresh_from_db()
        # The handed-back attempt is in the history and not counted (max_attempts=1, yet it ran again).
        assert [e["exception_class"] for e in job.errors] == [RELEASED_CLASS]
        assert job.attempts == 1


def test_a_dispatcher_paused_past_its_lease_is_killed_before_its_threads_could_run_beside_the_rescue(tmp_path):
    """SIGSTOP for three leases: its guardian kills it before the lease expires; the rescue runs the job once more."""
    job = lifecycle.enqueue(TICKER, [str(tmp_path), 4.0], max_attempts=3)[0]
    paused = start_dispatcher("--concurrency", "1", "--lease", "1", log_path=tmp_path / "a.log")
    other = None
    try:
        assert wait_for(lambda: Job.objects.filter(status="running").exists(), 30), log_tail(tmp_path / "a.log")
        other = start_dispatcher("--concurrency", "1", "--lease", "1", log_path=tmp_path / "b.log")
        paused.send_signal(signal.SIGSTOP)
        # Killed while stopped (SIGKILL reaches a stopped process), within the lease it held.
        assert paused.wait(30) == -signal.SIGKILL, log_tail(tmp_path / "a.log")
        assert "did not renew its leases in time" in log_tail(tmp_path / "a.log")
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", 60), log_tail(tmp_path / "b.log")
    finally:
        kill_and_wait(paused, *([other] if other else []))
    assert overlapping_runs(tmp_path) == []
    job.refresh_from_db()
    assert [e["exception_class"] for e in job.errors] == [LEASE_EXPIRED_CLASS]
    assert job.attempts == 2
