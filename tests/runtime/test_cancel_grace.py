"""Stop running work: in a process queue, a cancelled job that does not stop within CANCEL_GRACE loses its worker.

Real dispatcher processes, real worker processes, real signals: the worker
is gone (SIGTERM, or SIGKILL two seconds later when it ignores SIGTERM), the
task never finishes, the job ends cancelled with its dependents, and the
slot's fresh worker runs the next job. Thread queues stay cooperative.
"""

import os
import time
from pathlib import Path

import psutil
import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD, start_dispatcher, wait_for
from tests.runtime.test_process_workers import gone, kill, log_tail

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

STUBBORN = "tests.testapp.tasks.stubborn"


def worker_pid(marker_dir, name, log):
    path = os.path.join(marker_dir, f"pid-{name}")
    # Written by the worker: there and whole (a write may be seen half done).
    whole = lambda: os.path.exists(path) and Path(path).read_text().strip().isdigit()  # noqa: E731
    assert wait_for(whole, 60), log_tail(log)
    return int(Path(path).read_text())


@pytest.mark.parametrize("ignore_term", [False, True], ids=["sigterm", "sigkill"])
def test_a_cancelled_job_that_does_not_stop_has_its_worker_terminated(marker_dir, tmp_path, ignore_term):
    job = lifecycle.enqueue(STUBBORN, [marker_dir, "a", 30.0, ignore_term], queue="slow", max_attempts=3)[0]
    dependent = lifecycle.enqueue(ADD, [1, 2], depends_on=[job.pk])[0]
    log = tmp_path / "d.log"
    dispatcher = start_dispatcher(
        "--queue",
        "slow:1:process",
        "--queue",
        "default:1",
        "--poll-interval",
        "0.2",
        log_path=log,
        SCHEDULER_TEST_CANCEL_GRACE="1.0",
    )
    try:
        pid = worker_pid(marker_dir, "a", log)
        assert lifecycle.cancel(job.pk) == "cancel_requested"
        asked = time.monotonic()
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "cancelled", 30), log_tail(log)
        took = time.monotonic() - asked
        assert gone(pid)
        # Not before the grace; then SIGTERM, and SIGKILL for a worker that ignores it.
        job.refresh_from_db()
        message = job.errors[-1]["message"]
        assert took >= 1.0, (took, message)
        assert message.endswith(f"was killed by {'SIGKILL' if ignore_term else 'SIGTERM'}."), message
        assert job.errors[-1]["exception_class"].endswith("WorkerProcessTerminated")
        assert "CANCEL_GRACE" in message
        assert Job.objects.get(pk=dependent.pk).status == "cancelled"
        # The slot's fresh worker runs the next job of the queue.
        after = lifecycle.enqueue(STUBBORN, [marker_dir, "b", 0.0], queue="slow")[0]
        assert wait_for(lambda: Job.objects.get(pk=after.pk).status == "succeeded", 60), log_tail(log)
        assert worker_pid(marker_dir, "b", log) != pid
        assert not os.path.exists(os.path.join(marker_dir, "finished-a"))  # the cancelled task never finished
        job.refresh_from_db()
        assert (job.status, job.attempts, job.result) == ("cancelled", 1, None)
    finally:
        kill(dispatcher)


def test_a_thread_queue_stays_cooperative(marker_dir, tmp_path):
    job = lifecycle.enqueue(STUBBORN, [marker_dir, "t", 3.0], queue="slow")[0]
    log = tmp_path / "d.log"
    dispatcher = start_dispatcher(
        "--queue", "slow:1", "--poll-interval", "0.2", log_path=log, SCHEDULER_TEST_CANCEL_GRACE="0.5"
    )
    try:
        pid = worker_pid(marker_dir, "t", log)
        assert pid == dispatcher.pid  # a thread of the dispatcher itself
        assert lifecycle.cancel(job.pk) == "cancel_requested"
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status != "running", 30), log_tail(log)
        # The task ran to its end: a thread cannot be stopped; the success stands (the one rule).
        assert os.path.exists(os.path.join(marker_dir, "finished-t"))
        assert Job.objects.get(pk=job.pk).status == "succeeded"
        assert psutil.pid_exists(dispatcher.pid)
    finally:
        kill(dispatcher)
