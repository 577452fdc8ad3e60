"""Run one claimed attempt on a worker thread and describe how it ended.

Around the task call it sends Django's ``task_started`` and
``task_finished`` (``scheduler_app.taskresults`` builds the TaskResult, only
when someone listens or the task takes a context).
"""

import asyncio
import dataclasses
import logging
import time
from datetime import UTC, datetime
from traceback import format_exception

from django.db import close_old_connections
from django.tasks.signals import task_finished, task_started

from .. import conf, lifecycle, registry, taskresults
from ..context import JobCancelled, JobContext
from ..observability import joblogs, redacting
from ..observability.logflush import LogFlusher
from ..validation.durations import Snooze
from ..vocabulary.jobs import Status
from ..vocabulary.policy import TIMEOUT_CLASS
from ..vocabulary.redaction import scrub, secret_texts
from . import forks
from .store import default_policy

# The logger name the README documents: projects configure it.
logger = logging.getLogger("scheduler_app.dispatcher.runner")


# What a task raises to end its attempt rather than fail it: a cancel (asyncio's too: the async lane's) or a snooze.
CANCELS = (JobCancelled, asyncio.CancelledError)
ENDINGS = (*CANCELS, Snooze)


def _now():
    return datetime.now(UTC)


class UnreadableJob(Exception):
    """Recorded as the error of a job whose stored row cannot be run as it is."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.dispatcher.runner"


@dataclasses.dataclass(slots=True)
class Call:
    """A task about to be called for an attempt, and who hears of it (``Executor.prepare``)."""

    task: object
    sender: object
    start: bool  # task_started has receivers
    finish: bool  # task_finished has receivers (at any level)
    result: object  # the attempt's TaskResult, when a signal or the task's context needs it


class Executor:
    """The pool's ``execute(job, cancel_event, deadline)``: call the task, return an Outcome.

    Its parts (``prepare``, ``outcome_of``, ``tell_finished``, ``with_logs``,
    ``context``) are the asyncio lane's too (``async_executor.py``): one
    boundary for how an attempt ends, whichever lane ran it.
    """

    lane = None  # the asyncio lane the pool hands ``async`` queues' attempts to (wiring sets it)

    def __init__(self, policy, using="default", *, own_connections=True):
        self.policy = policy
        self.using = using
        # A worker thread owns its connection: recycled around each job. The
        # test helpers run jobs in the caller's thread and transaction, and
        # must not touch its connection.
        self.own_connections = own_connections
        # Writes running attempts' log records while they run (not for the test
        # helpers: another connection would not see the caller's transaction).
        self.flusher = LogFlusher(using) if own_connections else None
        redacting.install()  # Django's line about a failed attempt keeps [FILTERED] for a secret argument

    def __call__(self, job, cancel_event, deadline):
        # A child the task forked never reports for the slot, nor outlives the attempt (forks.py).
        with forks.attempt() as attempt:
            outcome = self._attempt(job, cancel_event, deadline)
        log_killed(job, attempt)
        return outcome

    def _attempt(self, job, cancel_event, deadline):
        if self.own_connections:
            close_old_connections()
        started = time.monotonic()
        log_start(job)
        try:
            base = self.stored_logs(job)
            secrets = secret_texts([job.args, job.kwargs], conf.filter_names())
            with (
                joblogs.capture((job.id, job.worker, job.attempt), self.flusher, base, secrets) as captured,
                redacting.hiding(secrets),
            ):
                outcome = self._run(job, cancel_event, deadline)
            outcome = with_logs(outcome, secrets, captured)
        finally:
            if self.own_connections:
                close_old_connections()
        log_outcome(job, outcome, time.monotonic() - started)
        return outcome

    @staticmethod
    def reads_stored_logs(job):
        """Return whether ``stored_logs`` reads the database for ``job`` (its attempt's number may hold records)."""
        return bool(job.snoozes) and joblogs.installed()

    def stored_logs(self, job):
        """Return the records the attempt's number already holds (after a snooze; see ``joblogs.stored``)."""
        if not self.reads_stored_logs(job):
            return 0
        try:
            return joblogs.stored(job, self.using)
        except Exception:  # noqa: BLE001 - the database is unreachable: the outcome will wait for it anyway
            logger.warning(
                "job %s: could not read its stored log records", job.id, extra={"job_id": job.id, "action": "start"}
            )
            return 0

    def prepare(self, job, cancel_event):
        """Return the ``Call`` of ``job``'s task, or the Outcome of an attempt that does not start."""
        if cancel_event.is_set():
            # Cancelled between its claim and its start: a job whose cancel
            # was requested never starts again (invariant 14).
            return self.policy.cancelled(job)
        try:
            task = registry.get(job.task)
        except registry.UnknownTask as exc:
            # Not retried: the next attempt would not find it either. No
            # signals: there is no Task to describe.
            return self.policy.fatal(job, exc, _now(), traceback_text="")
        if job.args is None or job.kwargs is None:
            # A row written around the service; every attempt would read the same.
            which = "args (a JSON list)" if job.args is None else "kwargs (a JSON object)"
            return self.policy.fatal(
                job, UnreadableJob(f"The job's stored {which} cannot be read."), _now(), traceback_text=""
            )
        sender, _ = taskresults.sender_of(task, job.backend or None)
        start = taskresults.wanted(task_started, sender)
        finish = taskresults.wanted(task_finished, sender)
        result = taskresults.attempt_result(job, task) if start or finish or task.takes_context else None
        return Call(task, sender, start, finish, result)

    def _run(self, job, cancel_event, deadline):
        call = self.prepare(job, cancel_event)
        if not isinstance(call, Call):
            return call
        if call.start:
            taskresults.send(task_started, call.sender, call.result)
        try:
            if call.task.takes_context:
                context = self.context(call.result, job, cancel_event, deadline)
                value = forks.call(call.task, context, *job.args, **job.kwargs)
            else:
                value = forks.call(call.task, *job.args, **job.kwargs)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the task raised is its attempt's error
            # sys.exit() in a task is an error of its attempt, not the end of the
            # thread (or of the worker process) that runs it.
            outcome = self.outcome_of(job, deadline, exc=exc)
            if not isinstance(exc, ENDINGS):
                # Inside the handler, as Django's backends do: its log receiver adds the traceback (sys.exc_info()).
                self.tell_finished(call, job, outcome, exc)
                return outcome
        else:
            outcome = self.outcome_of(job, deadline, value=value)
        self.tell_finished(call, job, outcome)
        return outcome

    def outcome_of(self, job, deadline, *, value=None, exc=None):
        """Return the Outcome of an attempt whose task returned ``value`` or raised ``exc``.

        ``JobCancelled`` (and asyncio's ``CancelledError``, the async lane's
        cancel) end it cancelled, ``Snooze`` snoozed, anything else is its
        error; an attempt that ended past its deadline timed out, whatever it did.
        """
        if (late := self._past_deadline(job, deadline)) is not None:
            return late
        if exc is None:
            return self.policy.succeeded(job, value, _now())
        if isinstance(exc, CANCELS):
            return self.policy.cancelled(job)
        if isinstance(exc, Snooze):
            return self.policy.snoozed(job, exc.seconds, _now())
        return self._raised(job, exc)

    @staticmethod
    def finish_heard(call, outcome, exc=None):
        """Return whether ``task_finished`` for ``outcome`` has a receiver that hears it (an error: Django's log's too)."""
        if call.finish:
            return True
        if exc is not None:
            return taskresults.wanted(task_finished, call.sender, level=logging.ERROR)
        return outcome.status not in (Status.SUCCEEDED, Status.CANCELLED) and taskresults.wanted(
            task_finished, call.sender, level=logging.ERROR
        )

    def tell_finished(self, call, job, outcome, exc=None):
        """Send ``task_finished`` for ``outcome`` if someone hears it (``finish_heard``).

        Call it inside the handler of ``exc``, the error the task raised (not one of ``ENDINGS``).
        """
        if self.finish_heard(call, outcome, exc):
            self._finished(call.sender, call.result or taskresults.attempt_result(job, call.task), outcome)

    def _raised(self, job, exc):
        if isinstance(exc, SystemExit):
            # Recorded as what it is (builtins.SystemExit), saying so; the traceback is the task's.
            return self.policy.raised(
                job, SystemExit(exit_message(exc)), _now(), traceback_text="".join(format_exception(exc))
            )
        return self.policy.raised(job, exc, _now())

    def _past_deadline(self, job, deadline):
        """Return the timeout Outcome of an attempt that ended after its deadline, else None.

        The loop fails such an attempt at its deadline and drops what it
        returns; saying the same here keeps ``task_finished`` and the row in
        agreement when the attempt ends before the loop noticed.
        """
        if deadline is not None and time.time() >= deadline:
            return self.policy.timed_out(job, _now())
        return None

    @staticmethod
    def _finished(sender, result, outcome):
        taskresults.apply_outcome(result, outcome, datetime.now(UTC))
        taskresults.send_finished(sender, result, cancelled=outcome.status == Status.CANCELLED)

    def context(self, result, job, cancel_event, deadline, report=None):
        """Return the JobContext of ``job``'s attempt; ``report(progress)`` writes its progress (default: here, now)."""

        def write(progress):
            return lifecycle.set_progress(job.id, job.worker, job.attempt, progress, using=self.using)

        report = report or write
        return JobContext(
            task_result=result,
            job_id=job.id,
            deadline=deadline,
            cancel_event=cancel_event,
            progress_callback=report,
            workflow_lookup=lambda: lifecycle.workflow_of(job.id, using=self.using),
        )


def log_killed(job, attempt):
    """Log how many processes the task of ``job``'s ``forks.attempt`` forked and left running (they were killed)."""
    if attempt.killed:
        logger.info(
            "job %s: killed %d processes its task forked and left running",
            job.id,
            attempt.killed,
            extra={"job_id": job.id, "action": "forked"},
        )


def log_start(job):
    """Log an attempt's start (DEBUG)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "job %s started: %s attempt %d/%d",
            job.id,
            job.task,
            job.attempt,
            job.max_attempts,
            extra={"job_id": job.id, "action": "start"},
        )


def with_logs(outcome, secrets, captured):
    """Return ``outcome`` with its error scrubbed of ``secrets`` and the records ``captured`` left to write."""
    if secrets and outcome.error:  # an error that quotes a secret argument keeps [FILTERED] instead
        error = {k: scrub(v, secrets) for k, v in outcome.error.items()}
        outcome = dataclasses.replace(outcome, error=error)
    if captured is not None:
        rows = captured.rows()  # what the flusher did not write: the capture is closed
        if rows:
            outcome = dataclasses.replace(outcome, logs=rows, logs_before=captured.base + captured.flushed)
    return outcome


def exit_message(exc):
    """Say what a task that raised SystemExit ``exc`` did: "The task called sys.exit(3)."."""
    code = exc.code
    argument = "" if code is None else str(code) if isinstance(code, int) else repr(code)
    return f"The task called sys.exit({argument})."


def _error_summary(error):
    name = (error.get("exception_class") or "").rsplit(".", 1)[-1]
    message = (error.get("message") or "").strip().splitlines()
    return f"{name}: {message[0][:200]}" if message else name


def log_outcome(job, outcome, seconds):
    """Log how an attempt ended: a success or a cancel at DEBUG (the loop logs a summary at INFO),
    a retry at INFO naming its time, a failure at WARNING."""
    extra = {"job_id": job.id, "action": "end", "outcome": str(outcome.status)}
    level, numbered = logging.INFO, (job.id, job.attempt, job.max_attempts, job.task, seconds)
    if outcome.error is not None and outcome.error.get("exception_class") == TIMEOUT_CLASS:
        # The loop failed (or retried) it at its deadline and logged that.
        message, args = "job %s attempt %d/%d of %s returned after its deadline (%.3fs): timed out", numbered
    elif outcome.snoozed:
        extra["outcome"] = "snooze"
        message = "job %s attempt %d of %s snoozed after %.3fs; runs again at %s (not counted as an attempt)"
        args = (job.id, job.attempt, job.task, seconds, _utc_text(outcome.retry_at))
    elif outcome.status == Status.PENDING:
        extra["outcome"] = "retry"
        message = "job %s attempt %d/%d of %s failed in %.3fs (%s); retry at %s"
        args = (*numbered, _error_summary(outcome.error), _utc_text(outcome.retry_at))
    elif outcome.error is not None:
        level = logging.WARNING if outcome.status == Status.FAILED else logging.DEBUG
        message = "job %s %s: %s attempt %d/%d in %.3fs (%s)"
        args = (job.id, outcome.status, job.task, job.attempt, job.max_attempts, seconds, _error_summary(outcome.error))
    else:
        level, message = logging.DEBUG, "job %s %s: %s attempt %d in %.3fs"
        args = (job.id, outcome.status, job.task, job.attempt, seconds)
    if logger.isEnabledFor(level):
        logger.log(level, message, *args, extra=extra)


def _utc_text(moment):
    """Return ``moment`` as the log lines write a time: UTC, to the millisecond, with a Z."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def executor_for(using="default"):
    """Return ``(retry policy, thread executor)``, per-job log capture and fork hooks installed (a worker process calls it too)."""
    forks.install()  # a task's forked child starts clean: forks.py
    if conf.get("JOB_LOG_MAX_RECORDS"):
        joblogs.install()  # per-job logs: see joblogs
    policy = default_policy()
    return policy, Executor(policy, using)
