"""How an attempt's ending becomes an Outcome: retries, backoff, error entries.

Pure: the settings arrive as values (``wiring`` reads them), so the loop and
the tests use the same rules the executor does.
"""

import random
import traceback as tb
from dataclasses import dataclass, field
from datetime import timedelta

from . import storable
from .jobs import Outcome, Status

# Class paths recorded in ``errors`` for endings that are not exceptions of
# the task's own. Stored data: they keep these names (the classes are
# importable from scheduler_app.lifecycle).
TIMEOUT_CLASS = "scheduler_app.lifecycle.JobTimeout"
SNOOZED_TOO_OFTEN_CLASS = "scheduler_app.lifecycle.SnoozedTooOften"
LEASE_EXPIRED_CLASS = "scheduler_app.lifecycle.LeaseExpired"
LEASE_EXPIRED_MESSAGE = "Lost: the dispatcher running this attempt stopped renewing its lease."
RELEASED_CLASS = "scheduler_app.lifecycle.ReleasedAtShutdown"
RELEASED_MESSAGE = (
    "Released at shutdown: the attempt did not finish within its dispatcher's grace period "
    "(not counted; the job runs again once that dispatcher's process is gone)."
)

RESULT_TOO_LARGE_CLASS = "scheduler_app.lifecycle.ResultTooLarge"
UNSTORABLE_CLASS = "scheduler_app.lifecycle.UnstorableOutcome"


def error_entry(job, *, exception_class, message, traceback_text, now):
    """Return the ``errors`` entry of attempt ``job`` that ended with an error (storable: cleaned and bounded)."""
    try:
        message = str(message)
    except Exception as exc:  # noqa: BLE001 - an exception whose __str__ raises
        message = f"<the exception's message could not be read: {type(exc).__name__}>"
    return storable.error_entry(
        {
            "attempt": job.attempt,
            "time": now.isoformat(),
            "worker": job.worker,
            "exception_class": exception_class,
            "message": message,
            "traceback": traceback_text,
        }
    )


def _exception_entry(job, exc, now, traceback_text=None, *, message=None):
    if traceback_text is None:
        traceback_text = "".join(tb.format_exception(exc))
    return error_entry(
        job,
        exception_class=class_path(exc),
        message=exc if message is None else message,
        traceback_text=traceback_text,
        now=now,
    )


def class_path(exc):
    exc_type = type(exc)
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


@dataclass(frozen=True)
class RetryPolicy:
    """Retry with exponential backoff: ``base * 2 ** (attempt - 1)``, capped, +- jitter.

    ``task_options(task name)`` returns a task's own options (an object with
    ``retry_on`` and ``backoff``, or None): its ``backoff`` replaces ``base``,
    and an exception that is not one of its ``retry_on`` classes fails the
    job at once. Timeouts and lost attempts are retried while attempts remain.

    Every method that describes an ending takes ``now`` (an aware datetime):
    the policy never reads a clock, so the loop's fake clock is the only time.
    """

    base: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.25
    rng: random.Random = field(default_factory=random.Random, compare=False)
    task_options: object = field(default=None, compare=False)
    max_snoozes: int = 100
    # A return value whose JSON is longer fails its attempt (SCHEDULER["RESULT_MAX_BYTES"]).
    result_max_bytes: int | None = None

    def _options(self, task):
        return self.task_options(task) if self.task_options is not None else None

    def backoff(self, attempt, base=None):
        """Return seconds to wait before retrying after failed ``attempt`` (1-based)."""
        base = self.base if base is None else base
        delay = min(base * 2 ** (attempt - 1), self.cap)
        return max(0.0, delay * (1 + self.rng.uniform(-self.jitter, self.jitter)))

    def retry_at(self, task, attempt, now):
        """Return when a job of ``task`` whose ``attempt`` failed runs again (its own ``backoff`` first)."""
        base = getattr(self._options(task), "backoff", None)
        return now + timedelta(seconds=self.backoff(attempt, base))

    def failed(self, job, error, now):
        """Return the Outcome of an attempt that ended with ``error`` (an errors entry).

        While attempts remain the job goes back to pending after a backoff;
        otherwise it fails.
        """
        if job.attempt < job.max_attempts:
            retry_at = self.retry_at(job.task, job.attempt, now)
            return Outcome(job.id, job.worker, job.attempt, Status.PENDING, error=error, retry_at=retry_at)
        return Outcome(job.id, job.worker, job.attempt, Status.FAILED, error=error)

    def raised(self, job, exc, now, *, traceback_text=None):
        """Return the Outcome of an attempt whose task raised ``exc`` (retried while attempts remain,
        if the task's ``retry_on`` names it)."""
        retry_on = getattr(self._options(job.task), "retry_on", None)
        if retry_on is not None and not isinstance(exc, retry_on):
            return self.fatal(job, exc, now, traceback_text=traceback_text)
        return self.failed(job, _exception_entry(job, exc, now, traceback_text), now)

    @staticmethod
    def fatal(job, exc, now, *, message=None, traceback_text=None):
        """Return the Outcome of an attempt that failed in a way no retry can mend."""
        error = _exception_entry(job, exc, now, traceback_text, message=message)
        return Outcome(job.id, job.worker, job.attempt, Status.FAILED, error=error)

    def timed_out(self, job, now):
        """Return the Outcome of an attempt that ran past its timeout (its late result is dropped)."""
        message = f"Timed out after {job.timeout:g}s; the late result is discarded."
        error = error_entry(job, exception_class=TIMEOUT_CLASS, message=message, traceback_text="", now=now)
        return self.failed(job, error, now)

    def succeeded(self, job, value, now):
        """Return the Outcome of an attempt that returned ``value``.

        The value is stored as JSON text both databases accept
        (``storable.json_text``: NUL and lone surrogates replaced). A value
        that is not JSON, or whose JSON is longer than ``result_max_bytes``,
        fails the attempt for good (it would fail the same way again); the
        error keeps the reason.
        """
        if value is None:
            return Outcome(job.id, job.worker, job.attempt, Status.SUCCEEDED, result_json="null")
        try:
            result_json = storable.json_text(value)
        except (TypeError, ValueError, RecursionError) as exc:
            reason = f"The task's return value cannot be stored as JSON: {type(exc).__name__}: {exc}"
            return self.fatal(job, exc, now, message=reason)
        limit = self.result_max_bytes
        # ``json_text`` escapes every non-ASCII character and puts spaces
        # after separators: never fewer bytes than the compact UTF-8 measure
        # (``storable.json_size``, as ARGS_MAX_BYTES counts), which is taken
        # only for a value that may be too large.
        if limit is not None and len(result_json) > limit and (size := storable.json_size(value)) > limit:
            reason = (
                f"The task's return value is {size:,} bytes of JSON; at most {limit:,} are stored "
                "(SCHEDULER['RESULT_MAX_BYTES']). Store large results elsewhere and return a reference."
            )
            error = error_entry(job, exception_class=RESULT_TOO_LARGE_CLASS, message=reason, traceback_text="", now=now)
            return Outcome(job.id, job.worker, job.attempt, Status.FAILED, error=error)
        return Outcome(job.id, job.worker, job.attempt, Status.SUCCEEDED, result_json=result_json)

    def snoozed(self, job, seconds, now):
        """Return the Outcome of an attempt that snoozed: pending at now + ``seconds``, not counted.

        Past ``max_snoozes`` the attempt fails instead (retried while
        attempts remain, like any failure), so a job cannot snooze for ever.
        """
        if job.snoozes >= self.max_snoozes:
            message = f"The task snoozed too often: {job.snoozes} snoozes is the limit (SCHEDULER['MAX_SNOOZES'])."
            error = error_entry(
                job, exception_class=SNOOZED_TOO_OFTEN_CLASS, message=message, traceback_text="", now=now
            )
            return self.failed(job, error, now)
        retry_at = now + timedelta(seconds=seconds)
        return Outcome(job.id, job.worker, job.attempt, Status.PENDING, retry_at=retry_at, snoozed=True)

    @staticmethod
    def cancelled(job):
        return Outcome(job.id, job.worker, job.attempt, Status.CANCELLED)

    @staticmethod
    def unstorable(outcome, reason, now):
        """Return the failure that replaces ``outcome`` when the database refused to store it.

        It keeps nothing of the outcome but its attempt: no result, no logs,
        an error entry that says why (the database's own message).
        """
        message = f"The attempt's outcome could not be stored ({outcome.status}): {reason}"
        error = storable.error_entry(
            {
                "attempt": outcome.attempt,
                "time": now.isoformat(),
                "worker": outcome.worker,
                "exception_class": UNSTORABLE_CLASS,
                "message": message,
                "traceback": "",
            }
        )
        return Outcome(outcome.job_id, outcome.worker, outcome.attempt, Status.FAILED, error=error)
