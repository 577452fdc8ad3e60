"""Run one claimed attempt on a worker thread and describe how it ended."""

import logging
import time

from django.db import close_old_connections
from django.tasks import TaskResult, TaskResultStatus

from scheduler_app import lifecycle, registry
from scheduler_app.context import JobCancelled, JobContext

logger = logging.getLogger(__name__)


class UnreadableJob(Exception):
    """Recorded as the error of a job whose stored row cannot be run as it is."""


class Executor:
    """The pool's ``execute(job, cancel_event, deadline)``: call the task, return an Outcome."""

    def __init__(self, policy, using="default"):
        self.policy = policy
        self.using = using

    def __call__(self, job, cancel_event, deadline):
        close_old_connections()
        started = time.monotonic()
        logger.info(
            "job %s started: %s attempt %d/%d", job.id, job.task, job.attempt, job.max_attempts,
            extra={"job_id": job.id, "action": "start"},
        )
        try:
            outcome = self._run(job, cancel_event, deadline)
        finally:
            close_old_connections()
        logger.info(
            "job %s %s: %s attempt %d in %.3fs",
            job.id, outcome.status, job.task, job.attempt, time.monotonic() - started,
            extra={"job_id": job.id, "action": "end", "outcome": str(outcome.status)},
        )
        return outcome

    def _run(self, job, cancel_event, deadline):
        try:
            task = registry.get(job.task)
        except registry.UnknownTask as exc:
            # Not retried: the next attempt would not find it either.
            return self.policy.fatal(job, exc, traceback_text="")
        if job.args is None or job.kwargs is None:
            # A row written around the service; every attempt would read the same.
            which = "args (a JSON list)" if job.args is None else "kwargs (a JSON object)"
            return self.policy.fatal(job, UnreadableJob(f"The job's stored {which} cannot be read."), traceback_text="")
        try:
            if task.takes_context:
                context = self._context(task, job, cancel_event, deadline)
                value = task.call(context, *job.args, **job.kwargs)
            else:
                value = task.call(*job.args, **job.kwargs)
        except JobCancelled:
            return self.policy.cancelled(job)
        except Exception as exc:
            return self.policy.raised(job, exc)
        return self.policy.succeeded(job, value)

    def _context(self, task, job, cancel_event, deadline):
        result = TaskResult(
            task=task,
            id=str(job.id),
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=job.started_at,
            finished_at=None,
            last_attempted_at=job.started_at,
            args=job.args,
            kwargs=job.kwargs,
            backend=task.backend,
            errors=[],
            worker_ids=[job.worker] * job.attempt,
        )

        def report(progress):
            return lifecycle.set_progress(job.id, job.worker, job.attempt, progress, using=self.using)

        return JobContext(
            task_result=result,
            job_id=job.id,
            deadline=deadline,
            cancel_event=cancel_event,
            progress_callback=report,
        )
