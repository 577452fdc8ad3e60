"""The django.tasks backend: ``@task`` functions enqueue into the scheduler.

    TASKS = {"default": {"BACKEND": "scheduler_app.backends.SchedulerBackend",
                         "QUEUES": ["default", "slow"],
                         "OPTIONS": {"max_attempts": 3}}}

This module loads before the app registry is ready, so models and the
lifecycle service are imported inside methods.

Every refusal is an ``InvalidTask`` in the caller's words (``run_after``,
``queue_name``: ``validation.errors.TASKS_WORDS``); one of the task's
arguments is an :class:`InvalidTaskArguments`, which is a ``TypeError`` too,
as Django's own backends raise for arguments that are not JSON.
"""

import contextlib

from django.core.exceptions import ValidationError
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist

from .validation.errors import TASKS_WORDS, error_text, refused_arguments


class InvalidTaskArguments(InvalidTask, TypeError):
    """A task's arguments were refused (not JSON, too large, not its signature, its own check).

    An ``InvalidTask``, and a ``TypeError`` as Django's own backends raise:
    code that catches either around ``enqueue()`` catches it.
    """


def invalid_task(exc):
    """Return the error a django.tasks caller gets for a ValidationError of the scheduler's rules, in its words."""
    kind = InvalidTaskArguments if refused_arguments(exc) else InvalidTask
    return kind(error_text(exc, TASKS_WORDS))


class SchedulerBackend(BaseTaskBackend):
    is_scheduler_backend = True  # how conf.known_queues() finds the scheduler's backends
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias, params):
        super().__init__(alias, params)
        self._valid = set()  # Tasks that passed validate_task
        self.database = self.options.get("database", "default")

    def validate_task(self, task):
        """Refuse what the scheduler's rules refuse, in their words, then what Django checks.

        A Task is immutable, so one that passed is remembered (Django runs this
        at every ``using()`` and ``enqueue()``: a fifth of an enqueue's time).

        Runs when a ``Task`` is defined and at every ``using()``: before the
        app registry is ready, so it checks the values the task carries,
        not whether it is registered (``enqueue`` does).
        """
        try:
            if task in self._valid:
                return
        except TypeError:  # an unhashable Task (a list in a field): check every time
            pass
        from .lifecycle.building import QUEUE
        from .validation.fields import EXECUTE_AT, PRIORITY

        checks = [(PRIORITY, task.priority), (QUEUE, task.queue_name)]
        if task.run_after is not None:
            checks.append((EXECUTE_AT, task.run_after))
        for rule, value in checks:
            try:
                rule.check(value)
            except ValidationError as exc:
                raise invalid_task(exc) from None
        super().validate_task(task)
        with contextlib.suppress(TypeError):
            if len(self._valid) > 4096:
                self._valid.clear()
            self._valid.add(task)

    def enqueue(self, task, args, kwargs):
        from . import lifecycle
        from .lifecycle.building import declared

        self.validate_task(task)
        try:
            job, _ = lifecycle.enqueue(
                task,
                list(args),
                dict(kwargs),
                execute_at=task.run_after,
                # Django's defaults count as not chosen: a SCHEDULER["ROUTES"] entry may set them.
                priority=declared("priority", task.priority),
                queue=declared("queue_name", task.queue_name),
                backend_options=self.options,
                using=self.database,
            )
        except ValidationError as exc:
            raise invalid_task(exc) from exc
        return self.to_result(job, task=task)

    def get_result(self, result_id):
        from .models import Job

        try:
            job = Job.objects.using(self.database).get(pk=int(result_id))
        except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
            raise TaskResultDoesNotExist(result_id) from None
        return self.to_result(job)

    def to_result(self, job, task=None):
        """Return the TaskResult of a Job row (the mapping: ``scheduler_app.taskresults``)."""
        from . import registry, taskresults

        try:
            # The backend it was enqueued through, whichever backend reads it back.
            return taskresults.job_result(job, task, alias=job.backend or self.alias)
        except registry.UnknownTask:
            raise TaskResultDoesNotExist(f"{job.pk}: its task {job.task} is no longer registered") from None
