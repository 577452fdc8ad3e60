"""What a test wants a job to do when it runs, and an executor that does it (for the pool and the loop)."""

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from scheduler_app.vocabulary.jobs import ClaimedJob, Outcome, Status


@dataclass
class Behaviour:
    """What the fake executor does with a job: sleep (cooperatively), then maybe raise."""

    sleep: float = 0.0
    # Set by the test to let the job return: until then it runs on, deaf to
    # its cancel flag (a task that does not cooperate).
    hold: threading.Event | None = None
    raises: bool = False
    runs: list = field(default_factory=list)  # time.monotonic() of each start


class FakeExecutor:
    """The pool's ``execute(job, cancel_event, deadline)``, driven by a side dict of Behaviours."""

    def __init__(self, behaviours=None):
        self.behaviours = {} if behaviours is None else behaviours  # job id -> Behaviour

    def behave(self, job_id, **kw):
        self.behaviours[job_id] = Behaviour(**kw)
        return self.behaviours[job_id]

    def __call__(self, job, cancel_event, deadline):
        behaviour = self.behaviours.get(job.id) or Behaviour()
        behaviour.runs.append(time.monotonic())
        if behaviour.hold is not None:
            behaviour.hold.wait(30)  # a hang guard: tests set it long before
        end = time.monotonic() + behaviour.sleep
        while time.monotonic() < end:
            if cancel_event.is_set():
                return Outcome(job.id, job.worker, job.attempt, Status.CANCELLED)
            time.sleep(0.005)
        if behaviour.raises:
            raise RuntimeError("executor bug")
        return Outcome(job.id, job.worker, job.attempt, Status.SUCCEEDED)


def claimed_job(job_id, *, timeout=None, cancel_requested=False, worker="fake", attempt=1, max_attempts=1):
    """Return a ClaimedJob for tests that hand jobs to the pool directly."""
    now = datetime.now(UTC)
    return ClaimedJob(
        id=job_id,
        task="fake",
        args=[],
        kwargs={},
        queue="default",
        priority=0,
        execute_at=now.timestamp(),
        attempt=attempt,
        max_attempts=max_attempts,
        timeout=timeout,
        cancel_requested=cancel_requested,
        worker=worker,
        last_attempted_at=now,
        started_at=now,
    )
