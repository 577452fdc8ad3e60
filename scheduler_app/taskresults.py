"""Jobs as ``django.tasks`` sees them: their TaskResults, and Django's task signals.

One mapping serves the backend's ``get_result()`` (a Job row) and the
signals (a new row, or a claimed attempt), so both report the same thing:

- status: pending and waiting (on dependencies) READY, running RUNNING,
  succeeded SUCCESSFUL, failed and cancelled FAILED;
- ``enqueued_at`` is the row's creation, ``started_at`` the first attempt's
  start, ``last_attempted_at`` the latest attempt's;
- ``task.run_after`` is the job's time only when the job is deferred.
  ``build_job`` sets ``execute_at`` and ``created_at`` from one ``now`` when
  no time is given, so a job is deferred exactly when the two differ:
  enqueued with a time, rescheduled, or waiting for a retry (then it is the
  retry's time). Otherwise None, as Django's own backends report it;
- one TaskError per ``errors`` entry, one worker id per attempt.

The signals go out as Django's backends send them (``sender=type(backend)``,
``task_result=``), through ``send_robust``: a receiver that raises is logged
and never breaks an enqueue or a job. Django connects its own log receivers
to all three; when they are the only receivers and the ``django.tasks``
logger would drop their line (any project that did not turn it up: the
root logger's WARNING), a signal would do nothing, and ``wanted()`` says
so: neither the TaskResult is built nor the signal sent.
"""

import contextvars
import json
import logging
from dataclasses import fields

from django.core.signals import setting_changed
from django.tasks import TaskResult, TaskResultStatus, task_backends
from django.tasks import signals as django_task_signals
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTaskBackend
from django.tasks.signals import task_enqueued, task_finished, task_started

from . import registry
from .conf import scheduler_backends
from .vocabulary.jobs import Status

logger = logging.getLogger(__name__)

STATUS_MAP = {
    Status.PENDING: TaskResultStatus.READY,
    Status.WAITING: TaskResultStatus.READY,
    Status.RUNNING: TaskResultStatus.RUNNING,
    Status.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    Status.FAILED: TaskResultStatus.FAILED,
    Status.CANCELLED: TaskResultStatus.FAILED,
}

SIGNAL_NAMES = {task_enqueued: "task_enqueued", task_started: "task_started", task_finished: "task_finished"}

# Django's own receiver of each signal and the level it logs at (a failed
# task's task_finished line is at ERROR: ``wanted(..., level=ERROR)``).
_DJANGO_LOG_RECEIVERS = {
    task_enqueued: (django_task_signals.log_task_enqueued, logging.DEBUG),
    task_started: (django_task_signals.log_task_started, logging.INFO),
    task_finished: (django_task_signals.log_task_finished, logging.INFO),
}
_tasks_log = logging.getLogger("django.tasks")


def wanted(signal, sender, level=None):
    """Return whether sending ``signal`` from ``sender`` would do anything.

    True when a receiver other than Django's log line listens, or when that
    line's level (``level``, else the one it logs at) is enabled.
    """
    try:
        sync, asynchronous = signal._live_receivers(sender)
    except (AttributeError, TypeError, ValueError):  # another Django: assume someone listens
        return signal.has_listeners(sender)
    own, own_level = _DJANGO_LOG_RECEIVERS[signal]
    if asynchronous or any(receiver is not own for receiver in sync):
        return True
    return bool(sync) and _tasks_log.isEnabledFor(level or own_level)


# task backend alias -> (sender, alias of the results); any thread reads,
# a settings change clears it.
_senders = {}
_task_fields = {}  # Task class -> its field names


def sender_of(task, alias=None):
    """Return ``(sender, backend alias)`` of the results of ``task``.

    The task's own backend when it is a scheduler backend; otherwise (a
    registered task of another backend, run by the scheduler through the
    admin or the API, or an alias no longer in ``settings.TASKS``) the first
    scheduler backend. ``alias`` names the backend to report outright.
    """
    key = alias or task.backend
    found = _senders.get(key)
    if found is None:
        found = _senders[key] = _find_sender(key, explicit=alias is not None)
    return found


def _find_sender(alias, *, explicit):
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend:
        backend = None
    if backend is None or not (explicit or getattr(backend, "is_scheduler_backend", False)):
        backend = next(iter(scheduler_backends()), backend)
    if backend is None:  # no task backend at all (a system check reports it)
        return BaseTaskBackend, alias
    return type(backend), backend.alias


def _forget_senders(*, setting, **kwargs):
    if setting == "TASKS":
        _senders.clear()


setting_changed.connect(_forget_senders, dispatch_uid="scheduler_app.taskresults")


def task_as(task, *, priority, queue, run_after, alias):
    """Return ``task`` with the job's priority, queue, run_after and backend.

    Like ``task.using()`` without validating again (``using`` re-runs the
    backend's checks, which the job passed when it was stored), so a result
    is cheap to build and a stored job always has one, even after the
    settings changed.
    """
    if (task.priority, task.queue_name, task.run_after, task.backend) == (priority, queue, run_after, alias):
        return task
    cls = type(task)
    names = _task_fields.get(cls)
    if names is None:
        names = _task_fields[cls] = [f.name for f in fields(cls)]
    clone = object.__new__(cls)
    for name in names:
        object.__setattr__(clone, name, getattr(task, name))
    for name, value in (("priority", priority), ("queue_name", queue), ("run_after", run_after), ("backend", alias)):
        object.__setattr__(clone, name, value)
    return clone


def task_error(entry):
    """Return the TaskError of one ``errors`` entry."""
    return TaskError(
        exception_class_path=entry.get("exception_class", "builtins.Exception"), traceback=entry.get("traceback", "")
    )


def _deferred(execute_at, created_at):
    return execute_at if execute_at != created_at else None


def job_result(job, task=None, alias=None):
    """Return the TaskResult of a Job row (``task``: its registered Task, looked up if None).

    Its backend is ``alias``, else the one the job was enqueued through
    (``Job.backend``), else the task's own (``sender_of``).

    Raise ``registry.UnknownTask`` when the job's task is no longer registered.
    """
    if task is None:
        task = registry.get(job.task)
    _, alias = sender_of(task, alias or job.backend or None)
    result = TaskResult(
        task=task_as(
            task,
            priority=job.priority,
            queue=job.queue,
            run_after=_deferred(job.execute_at, job.created_at),
            alias=alias,
        ),
        id=str(job.pk),
        status=STATUS_MAP[job.status],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.attempt_started_at,
        args=job.args,
        kwargs=job.kwargs,
        backend=alias,
        errors=[task_error(e) for e in job.errors or []],
        worker_ids=job.worker_ids,
    )
    object.__setattr__(result, "_return_value", job.result)
    return result


def _load_errors(value):
    if not isinstance(value, (str, bytes)):
        return list(value or ())
    return [] if value == "[]" else json.loads(value)  # most attempts are first ones


def attempt_result(job, task):
    """Return the RUNNING TaskResult of a claimed attempt (a ``ClaimedJob``) of ``task``."""
    _, alias = sender_of(task, job.backend or None)
    errors = _load_errors(job.errors)
    if errors or job.attempt > 1:
        # One worker per attempt, this one last; an attempt that left no
        # entry (cancelled, then retried) has an unknown worker: "".
        earlier = [e.get("worker", "") for e in errors][max(len(errors) - (job.attempt - 1), 0) :]
        workers = [""] * (job.attempt - 1 - len(earlier)) + earlier + [job.worker]
    else:
        workers = [job.worker]
    return TaskResult(
        task=task_as(
            task,
            priority=job.priority,
            queue=job.queue,
            run_after=_deferred(job.execute_at, job.enqueued_at),
            alias=alias,
        ),
        id=str(job.id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at or job.last_attempted_at,
        finished_at=None,
        last_attempted_at=job.last_attempted_at,
        args=job.args,
        kwargs=job.kwargs,
        backend=alias,
        errors=[task_error(e) for e in errors],
        worker_ids=workers,
    )


def apply_outcome(result, outcome, now):
    """Update an attempt's TaskResult in place to what it is after ``outcome`` (an Outcome).

    A retry is READY with the attempt's error added and ``run_after`` the
    retry's time; FAILED only when no attempt remains (or cancelled);
    SUCCESSFUL with the stored return value.
    """
    status = STATUS_MAP[outcome.status]
    object.__setattr__(result, "status", status)
    if outcome.error is not None:
        result.errors.append(task_error(outcome.error))
    if outcome.status == Status.PENDING:
        task = result.task
        object.__setattr__(
            result,
            "task",
            task_as(
                task, priority=task.priority, queue=task.queue_name, run_after=outcome.retry_at, alias=task.backend
            ),
        )
        return result
    object.__setattr__(result, "finished_at", now)
    if outcome.status == Status.SUCCEEDED:
        value = None if outcome.result_json == "null" else json.loads(outcome.result_json)
        object.__setattr__(result, "_return_value", value)
    return result


# The id of the result whose task_finished is being sent for a cancelled
# attempt (this thread or task only): Django's log line for it says so, at INFO.
_cancelled_id = contextvars.ContextVar("scheduler_cancelled_result", default=None)
_DJANGO_FINISHED_LINE = "Task id=%s path=%s state=%s"


class CancelledLine(logging.Filter):
    """Say "cancelled" at INFO where Django's log receiver would say ERROR ... state=FAILED.

    django.tasks has no cancelled status (a cancelled job's result is FAILED,
    which every other receiver still gets); its own log line would report an
    operator's cancel as an error. Installed on the ``django.tasks`` logger.
    """

    def filter(self, record):
        cancelled = _cancelled_id.get()
        if cancelled is None or record.msg != _DJANGO_FINISHED_LINE or not record.args:
            return True
        if str(record.args[0]) != cancelled:
            return True
        record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg = "Task id=%s path=%s cancelled (state=%s)"
        record.exc_info = record.exc_text = None
        return _tasks_log.isEnabledFor(logging.INFO)


def install_log_filter():
    """Put CancelledLine on the ``django.tasks`` logger once (AppConfig.ready)."""
    if not any(isinstance(f, CancelledLine) for f in _tasks_log.filters):
        _tasks_log.addFilter(CancelledLine())


def send_finished(sender, result, *, cancelled=False):
    """Send ``task_finished`` for ``result``; a cancelled attempt's is logged as cancelled, at INFO."""
    if not cancelled:
        send(task_finished, sender, result)
        return
    token = _cancelled_id.set(str(result.id))
    try:
        send(task_finished, sender, result)
    finally:
        _cancelled_id.reset(token)


def send(signal, sender, result):
    """Send ``signal`` for ``result``; log (never raise) what a receiver raised."""
    for receiver, response in signal.send_robust(sender=sender, task_result=result):
        if isinstance(response, Exception):
            logger.error(
                "a %s receiver (%s) raised for job %s",
                SIGNAL_NAMES.get(signal, "task signal"),
                getattr(receiver, "__qualname__", receiver),
                result.id,
                exc_info=response,
                extra={"job_id": result.id, "action": "signal_error"},
            )


def send_enqueued(jobs, task=None):
    """Send ``task_enqueued`` for new Job rows (``task``: their Task, if one for all).

    Whether anyone listens is asked once per sender: a bulk call's jobs
    mostly share one.
    """
    listened = {}  # sender -> wanted(task_enqueued, sender)
    for job in jobs:
        if job.pk is None:
            continue
        try:
            job_task = registry.get(job.task) if task is None else task
        except registry.UnknownTask:
            continue
        sender, _ = sender_of(job_task, job.backend or None)
        heard = listened.get(sender)
        if heard is None:
            heard = listened[sender] = wanted(task_enqueued, sender)
        if heard:
            send(task_enqueued, sender, job_result(job, job_task))
