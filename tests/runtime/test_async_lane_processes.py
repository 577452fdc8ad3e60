"""The asyncio lane at a deploy: SIGTERM to a real ``rundispatcher --queue other:N:async`` (invariants 10 and 14).

Running coroutines finish within the grace; one that does not is cancelled for
real (CancelledError reaches it) before its job is handed back, and the job runs
again on another dispatcher only once the first is gone, never beside its first
run (read from the tasks' own records: ``async_ticker``, a line every 20 ms).
"""

import signal
import time

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.vocabulary.policy import RELEASED_CLASS
from tests.plumbing import kill_and_wait, log_tail, overlapping_runs, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TICKER = "tests.testapp.tasks.async_ticker"


def test_sigterm_lets_coroutines_finish_within_the_grace_and_cancels_the_rest_before_the_hand_back(tmp_path):
    quick = lifecycle.enqueue(TICKER, [str(tmp_path), 1.5], queue="other", max_attempts=1)[0]
    slow = lifecycle.enqueue(TICKER, [str(tmp_path), 6.0], queue="other", max_attempts=1)[0]
    args = ("--queue", "other:50:async", "--lease", "5")
    first = start_dispatcher(*args, "--grace", "3", log_path=tmp_path / "a.log", log_level="INFO")
    second = None
    try:
        running = lambda: Job.objects.filter(status="running").count() == 2  # noqa: E731
        assert wait_for(running, 30), log_tail(tmp_path / "a.log")
        assert wait_for(lambda: (tmp_path / f"ticks-{slow.pk}").exists(), 30)
        signalled = time.time()
        first.send_signal(signal.SIGTERM)
        assert first.wait(30) == 0, log_tail(tmp_path / "a.log")
        assert "handed back 1 unfinished jobs" in log_tail(tmp_path / "a.log")
        # Cancelled for real in the first dispatcher, before the hand-back.
        assert (tmp_path / f"cancelled-{slow.pk}").exists()
        second = start_dispatcher(*args, log_path=tmp_path / "b.log")
        done = lambda: Job.objects.filter(status="succeeded").count() == 2  # noqa: E731
        assert wait_for(done, 60), (log_tail(tmp_path / "b.log"), list(Job.objects.values("status", "errors")))
    finally:
        kill_and_wait(first, *([second] if second else []))
    assert overlapping_runs(tmp_path) == []
    quick.refresh_from_db()
    slow.refresh_from_db()
    assert quick.errors == [] and quick.attempts == 1
    # It ran on past the signal, and finished within the grace.
    assert float((tmp_path / f"ticks-{quick.pk}").read_text().split()[-1]) > signalled
    # The handed-back attempt is in the history and not counted (max_attempts=1, yet it ran again).
    assert [e["exception_class"] for e in slow.errors] == [RELEASED_CLASS]
    assert slow.attempts == 1
    runs = {line.split()[1] for line in (tmp_path / f"ticks-{slow.pk}").read_text().splitlines()}
    assert len(runs) == 2


def test_a_coroutine_that_ignores_its_cancel_ends_with_its_process_before_its_job_runs_again(tmp_path):
    stubborn = lifecycle.enqueue(TICKER, [str(tmp_path), 12.0, True], queue="other", max_attempts=1)[0]
    args = ("--queue", "other:5:async", "--lease", "5")
    first = start_dispatcher(*args, "--grace", "0.5", log_path=tmp_path / "a.log", log_level="INFO")
    second = None
    try:
        assert wait_for(lambda: (tmp_path / f"ticks-{stubborn.pk}").exists(), 30), log_tail(tmp_path / "a.log")
        second = start_dispatcher(*args, log_path=tmp_path / "b.log")
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0, log_tail(tmp_path / "a.log")
        assert "1 async attempts did not end" in log_tail(tmp_path / "a.log")
        assert (tmp_path / f"cancelled-{stubborn.pk}").exists()
        done = lambda: Job.objects.get(pk=stubborn.pk).status == "succeeded"  # noqa: E731
        assert wait_for(done, 90), (log_tail(tmp_path / "b.log"), list(Job.objects.values("status", "errors")))
    finally:
        kill_and_wait(first, *([second] if second else []))
    assert overlapping_runs(tmp_path) == []
    stubborn.refresh_from_db()
    assert [e["exception_class"] for e in stubborn.errors] == [RELEASED_CLASS]
