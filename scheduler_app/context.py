"""What a running task sees: the django.tasks context plus the scheduler's extras.

A task declared with ``@task(takes_context=True)`` receives a JobContext:

    @task(takes_context=True)
    def export(context, day):
        for chunk in chunks(day):
            if context.cancel_requested or context.time_left() < 1:
                raise JobCancelled()      # ends the job as cancelled
            if rate_limited():
                context.snooze(60)        # pending again in a minute; not an attempt
            context.set_progress(done, total)

An ``async def`` task awaits ``context.aset_progress(done, total)`` to
learn whether its attempt is still current (see ``runtime/async_executor.py``).
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.tasks import TaskContext

from .validation.durations import Snooze
from .validation.fields import PROGRESS
from .vocabulary.endings import JobCancelled

__all__ = ["JobCancelled", "JobContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext(TaskContext):
    job_id: int
    deadline: float | None = None  # epoch seconds; None: no timeout
    cancel_event: threading.Event = field(default_factory=threading.Event)
    progress_callback: Callable[[dict], bool] | None = None
    workflow_lookup: Callable[[], int | None] | None = None

    @property
    def workflow_id(self):
        """Return the id of the workflow this job belongs to (its callbacks' jobs too), or None."""
        return self.workflow_lookup() if self.workflow_lookup is not None else None

    @property
    def cancel_requested(self):
        """Return True once someone asked for this job to stop."""
        return self.cancel_event.is_set()

    def time_left(self):
        """Return seconds until the timeout (infinity without one)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - time.time()

    @property
    def should_stop(self):
        return self.cancel_requested or self.time_left() <= 0

    def snooze(self, seconds):
        """Stop here and run the job again ``seconds`` from now, without counting an attempt (raises Snooze)."""
        raise Snooze(seconds)

    def set_progress(self, current, total=None, message=""):
        """Record progress on the job row; return False if the attempt is no longer current.

        ``current`` and ``total``: numbers from 0 (int or float; total None:
        unknown; total at least current), ``message``: text (``validation.fields.PROGRESS``).
        Anything else raises TypeError or ValueError here, in the task.
        """
        progress = PROGRESS.check(current, total, message)
        if self.progress_callback is None:
            return True
        return self.progress_callback(progress)

    async def aset_progress(self, current, total=None, message=""):
        """``set_progress`` for an ``async def`` task: the write runs on a thread; return its answer.

        (On an ``async`` queue's loop, ``set_progress`` does not wait: it
        hands the write on, in order, and returns True.)
        """
        return await sync_to_async(self.set_progress)(current, total, message)
