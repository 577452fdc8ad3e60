"""The rules of the scheduler's settings and of the dispatcher's options.

A value in ``settings.SCHEDULER`` and the ``rundispatcher`` option that
overrides it are the same knob: one Rule each (the lifecycle's kinds of rule,
bounds from ``limits``), judged at start-up by the system checks
(``checks.py``) and on a command line by argparse types
(``management/arguments.py``), with the same wording.
"""

from datetime import timedelta

import pytimeparse2
from django.core.exceptions import ValidationError

from ..tasks.webhooks import allowed_entry
from ..vocabulary import bounds as limits
from .fields import (
    CONCURRENCY_LIMIT,
    MAX_ATTEMPTS,
    RATE_LIMIT,
    RATE_PERIOD,
    Choice,
    Rule,
    Seconds,
    WholeNumber,
    json_problem,
)

DAY = 24 * 3600


class Fraction(Rule):
    def __init__(self, field):
        super().__init__(field, "Must be a number from 0 to 1.")

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            self.fail()  # NaN fails the comparison too
        return float(value)


class Flag(Rule):
    def __init__(self, field):
        super().__init__(field, "Must be True or False.")

    def check(self, value):
        if not isinstance(value, bool):
            self.fail()
        return value


class TextList(Rule):
    """A list of non-empty texts; ``shape`` (a function) may say what is wrong with one of them."""

    def __init__(self, field, what, shape=None):
        super().__init__(field, f"Must be a list of {what}.")
        self.shape = shape

    def check(self, value):
        if not isinstance(value, (list, tuple)):
            self.fail()
        for item in value:
            if not isinstance(item, str) or not item.strip() or json_problem(item):
                self.fail()
            problem = self.shape(item) if self.shape else None
            if problem:
                self.fail(problem)
        return list(value)


def _host_shape(item):
    try:
        allowed_entry(item)
    except ValueError as exc:
        return str(exc)
    return None


class Duration(Rule):
    """How old something may get: a timedelta from code; from a command line 3600, 90s, 30m, 12h, 7d or 2w."""

    def __init__(self, field, high):
        super().__init__(
            field,
            f"Must be a duration from 0 to {high.days} days, e.g. 3600 (seconds), 90s, 30m, 12h, 7d or 2w.",
        )
        self.high = high

    def check(self, value):
        if not isinstance(value, timedelta) or not timedelta(0) <= value <= self.high:
            self.fail()
        return value

    def parse(self, text):
        try:
            seconds = pytimeparse2.parse(str(text), raise_exception=True)
            value = timedelta(seconds=seconds)
        except Exception:  # any text the parser cannot read, or a length no timedelta holds
            self.fail()
        return self.check(value)


class LogLevel(Rule):
    """A logging level: a name Python's logging knows ("INFO") or a number from 0 to 50."""

    def __init__(self, field):
        super().__init__(field, "Must be a logging level: DEBUG, INFO, WARNING, ERROR, CRITICAL or a number from 0 to 50.")

    def check(self, value):
        if isinstance(value, str) and value.strip().upper() in LEVELS:
            return LEVELS[value.strip().upper()]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 50:
            self.fail()
        return value


LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class Secret(Rule):
    """None, or a text of at least 16 characters (a bearer token)."""

    def __init__(self, field):
        super().__init__(field, "Must be None or a text of 16 to 4096 printable ASCII characters.")

    def check(self, value):
        if value is None:
            return None
        if not isinstance(value, str) or not 16 <= len(value) <= 4096 or not value.isascii() or not value.isprintable():
            self.fail()
        return value
class QueueSettings(Rule):
    """SCHEDULER["QUEUES"]: queue name -> {"concurrency_limit", "rate_limit", "rate_period", "mode"}.

    A limit may be None (no limit). ``mode`` says how the queue's jobs run:
    "thread" (the worker threads) or "process".
    """

    rules = {"concurrency_limit": CONCURRENCY_LIMIT, "rate_limit": RATE_LIMIT, "rate_period": RATE_PERIOD}
    mode = Choice("mode", ("thread", "process"))

    def __init__(self, field):
        super().__init__(field, "Must be a dict of queue names to dicts of concurrency_limit, rate_limit, rate_period and mode.")

    def check(self, value):
        if not isinstance(value, dict):
            self.fail()
        for name, entry in value.items():
            if not isinstance(name, str) or not limits.QUEUE_NAME_RE.fullmatch(name):
                self.fail(f"{name!r} is not a queue name (1 to {limits.QUEUE_NAME_MAX} letters, digits, '_', '.' or '-').")
            if not isinstance(entry, dict):
                self.fail(f"{name}: {self.message}")
            unknown = sorted(set(entry) - {*self.rules, "mode"}, key=str)
            if unknown:
                self.fail(f"{name}: unknown key {unknown[0]!r}; the keys are concurrency_limit, rate_limit, rate_period and mode.")
            for key, rule in self.rules.items():
                if entry.get(key) is not None:
                    self._check(name, rule, entry[key])
            if "mode" in entry:
                self._check(name, self.mode, entry["mode"])
        return value

    def _check(self, name, rule, value):
        try:
            rule.check(value)
        except ValidationError as exc:
            self.fail(f"{name}: {rule.field}: {' '.join(exc.messages)}")


RETENTION_AGE = Duration("older_than", limits.RETENTION_MAX)

# Settings that were renamed: the old key -> the new one (checks.py warns, W002).
RENAMED = {"ALLOWED_COMMANDS": "RUN_COMMAND_ALLOWED"}

# settings.SCHEDULER key -> its rule (RETENTION, a mapping, is checked in checks.py).
SETTINGS = {
    "DEFAULT_MAX_ATTEMPTS": MAX_ATTEMPTS,
    "RETRY_BACKOFF_BASE": Seconds("RETRY_BACKOFF_BASE", DAY),
    "RETRY_BACKOFF_MAX": Seconds("RETRY_BACKOFF_MAX", limits.TIMEOUT_MAX),
    "RETRY_JITTER": Fraction("RETRY_JITTER"),
    "CONCURRENCY": WholeNumber("CONCURRENCY", 1, limits.CONCURRENCY_MAX),
    "HORIZON": Seconds("HORIZON", limits.HORIZON_MAX),
    "HEAP_CAP": WholeNumber("HEAP_CAP", 1, limits.HEAP_CAP_MAX),
    "POLL_INTERVAL": Seconds("POLL_INTERVAL", limits.POLL_INTERVAL_MAX),
    "SQLITE_CHANGE_CHECK": Seconds("SQLITE_CHANGE_CHECK", 60, zero_ok=True),
    "FULL_SYNC_INTERVAL": Seconds("FULL_SYNC_INTERVAL", DAY),
    "SYNC_OVERLAP": Seconds("SYNC_OVERLAP", limits.POLL_INTERVAL_MAX, zero_ok=True),
    "LEASE": Seconds("LEASE", limits.LEASE_MAX),
    "GRACE": Seconds("GRACE", limits.GRACE_MAX, zero_ok=True),
    "MAX_ABANDONED_THREADS": WholeNumber("MAX_ABANDONED_THREADS", 0, limits.CONCURRENCY_MAX),
    "DEAD_AFTER_LEASES": WholeNumber("DEAD_AFTER_LEASES", 1, 100),
    "PRUNE_BATCH": WholeNumber("PRUNE_BATCH", 1, 100_000),
    "SYNCHRONOUS_COMMIT": Flag("SYNCHRONOUS_COMMIT"),
    "SCHEDULE_MISFIRE_GRACE": Seconds("SCHEDULE_MISFIRE_GRACE", limits.HORIZON_MAX, zero_ok=True),
    "SCHEDULE_CATCH_UP_MAX": WholeNumber("SCHEDULE_CATCH_UP_MAX", 1, 1000),
    "RUN_COMMAND_ALLOWED": TextList("RUN_COMMAND_ALLOWED", "management command names"),
    "ARGS_MAX_BYTES": WholeNumber("ARGS_MAX_BYTES", limits.VALUE_BYTES_MIN, limits.VALUE_BYTES_MAX),
    "RESULT_MAX_BYTES": WholeNumber("RESULT_MAX_BYTES", limits.VALUE_BYTES_MIN, limits.VALUE_BYTES_MAX),
    "WEBHOOK_ALLOWED_HOSTS": TextList("WEBHOOK_ALLOWED_HOSTS", "hosts with optional ports", _host_shape),
    "WEBHOOK_TIMEOUT": Seconds("WEBHOOK_TIMEOUT", limits.WEBHOOK_TIMEOUT_MAX),
    "WEBHOOK_MAX_BODY": WholeNumber("WEBHOOK_MAX_BODY", 0, limits.WEBHOOK_MAX_BODY_MAX),
    "EMAIL_FROM_ALLOWED": TextList("EMAIL_FROM_ALLOWED", "email addresses"),
    "TASK_MODULES": TextList("TASK_MODULES", "dotted module paths"),
    "JOB_LOG_LEVEL": LogLevel("JOB_LOG_LEVEL"),
    "JOB_LOG_MAX_RECORDS": WholeNumber("JOB_LOG_MAX_RECORDS", 0, limits.JOB_LOG_RECORDS_MAX),
    "JOB_LOG_MAX_BYTES": WholeNumber("JOB_LOG_MAX_BYTES", 0, limits.JOB_LOG_BYTES_MAX),
    "ROLLUP_INTERVAL": Seconds("ROLLUP_INTERVAL", limits.POLL_INTERVAL_MAX, zero_ok=True),
    "ROLLUP_RETENTION": Duration("ROLLUP_RETENTION", limits.RETENTION_MAX),
    "METRICS_TOKEN": Secret("METRICS_TOKEN"),
    "QUEUES": QueueSettings("QUEUES"),
    "MAX_SNOOZES": WholeNumber("MAX_SNOOZES", 0, limits.MAX_SNOOZES_MAX),
}

# rundispatcher's options that are not settings.
MAX_JOBS = WholeNumber("max_jobs", 1, limits.MAX_JOBS_MAX)
PROCESSES = WholeNumber("processes", 1, limits.PROCESSES_MAX)
