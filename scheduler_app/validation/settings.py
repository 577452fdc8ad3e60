"""The rules of the scheduler's settings and of the dispatcher's options.

A value in ``settings.SCHEDULER`` and the ``rundispatcher`` option that
overrides it are the same knob: one Rule each (the lifecycle's kinds of rule,
bounds from ``vocabulary.bounds``), judged at start-up by the system checks
(``checks.py``) and on a command line by argparse types
(``management/arguments.py``), with the same wording.
"""

import re
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ValidationError

from ..vocabulary import bounds
from ..vocabulary.jobs import Status
from . import durations
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
from .hosts import allowed_entry
from .labels import ROUTES

DAY = 24 * 3600
# FILTER_ARGUMENTS' default: names that hold credentials in the libraries and APIs tasks call.
_CREDENTIALS = (
    "password passwd secret token api_key apikey authorization access_token refresh_token private_key client_secret "
    "credentials"
)
FILTERED_NAMES = tuple(_CREDENTIALS.split())


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


class Age(Rule):
    """How old something may get: a timedelta from code; from a command line 3600, 90s, 30m, 12h, 7d or 2w.

    The text is read as every duration is (``durations.seconds_of``).
    """

    def __init__(self, field, high):
        super().__init__(
            field, f"Must be a duration from 0 to {high.days} days, e.g. 3600 (seconds), 90s, 30m, 12h, 7d or 2w."
        )
        self.high = high

    def check(self, value):
        if not isinstance(value, timedelta) or not timedelta(0) <= value <= self.high:
            self.fail()
        return value

    def parse(self, text):
        seconds = durations.seconds_of(str(text))
        try:
            value = timedelta(seconds=seconds)
        except (TypeError, OverflowError):  # text that is no duration, or a length no timedelta holds
            self.fail()
        return self.check(value)


class LogLevel(Rule):
    """A logging level: a name Python's logging knows ("INFO") or a number from 0 to 50."""

    def __init__(self, field):
        super().__init__(
            field, "Must be a logging level: DEBUG, INFO, WARNING, ERROR, CRITICAL or a number from 0 to 50."
        )

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


MODES = ("thread", "process", "async")  # how a queue's jobs run (also ``rundispatcher --queue NAME:N:MODE``)


class QueueSettings(Rule):
    """SCHEDULER["QUEUES"]: queue name -> {"concurrency_limit", "rate_limit", "rate_period", "mode"}.

    A limit may be None (no limit). ``mode``: "thread" (worker threads), "process" (worker
    processes) or "async" (its ``async def`` tasks on one asyncio loop per dispatcher).
    """

    rules = {"concurrency_limit": CONCURRENCY_LIMIT, "rate_limit": RATE_LIMIT, "rate_period": RATE_PERIOD}
    mode = Choice("mode", MODES)

    def __init__(self, field):
        super().__init__(
            field, "Must be a dict of queue names to dicts of concurrency_limit, rate_limit, rate_period and mode."
        )

    def check(self, value):
        if not isinstance(value, dict):
            self.fail()
        for name, entry in value.items():
            if not isinstance(name, str) or not bounds.QUEUE_NAME_RE.fullmatch(name):
                self.fail(
                    f"{name!r} is not a queue name (1 to {bounds.QUEUE_NAME_MAX} letters, digits, '_', '.' or '-')."
                )
            if not isinstance(entry, dict):
                self.fail(f"{name}: {self.message}")
            unknown = sorted(set(entry) - {*self.rules, "mode"}, key=str)
            if unknown:
                self.fail(
                    f"{name}: unknown key {unknown[0]!r}; the keys are concurrency_limit, rate_limit, rate_period and mode."
                )
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


RETENTION_AGE = Age("older_than", bounds.RETENTION_MAX)


class Retention(Rule):
    """SCHEDULER["RETENTION"]: finished statuses mapped to how long their jobs are kept (timedeltas).

    Every problem is reported (one message each): ``names 'x': ...`` for a
    status that is not a finished one, ``['failed']: ...`` for a bad age.
    """

    def __init__(self, field):
        super().__init__(field, "must be a dict of finished statuses to timedelta ages.")

    def check(self, value):
        if not isinstance(value, dict):
            self.fail()
        problems = []
        for status, age in value.items():
            if status not in Status.FINISHED:
                problems.append(f"names {status!r}: only finished jobs are pruned ({', '.join(Status.FINISHED)}).")
                continue
            try:
                RETENTION_AGE.check(age)
            except ValidationError as exc:
                problems.append(f"[{status!r}]: {' '.join(exc.messages)}")
        if problems:
            raise ValidationError({self.field: problems})
        return value


class ChannelName(Rule):
    """A PostgreSQL NOTIFY channel: an identifier of 1 to 63 letters, digits and '_', not starting with a digit."""

    def __init__(self, field):
        super().__init__(field, "Must be 1 to 63 letters, digits or '_', not starting with a digit.")

    def check(self, value):
        if not isinstance(value, str) or not _CHANNEL.fullmatch(value):
            self.fail()
        return value


_CHANNEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass(frozen=True)
class Setting:
    """One key of ``settings.SCHEDULER``: its default, its rule (type and bounds) and what it means."""

    default: object
    rule: Rule
    doc: str
    check_id: str = "E005"  # the system check that reports a bad value (checks.py)


def _setting(default, rule, doc, check_id=None):
    if check_id is None:
        check_id = "E007" if isinstance(rule, TextList) else "E005"
    return Setting(default, rule, doc, check_id)


# Settings that were renamed: the old key -> the new one (checks.py warns, W002).
RENAMED = {"ALLOWED_COMMANDS": "RUN_COMMAND_ALLOWED"}

# Every key of settings.SCHEDULER, declared once: ``conf.get`` reads its
# default, the system checks its rule, docs/CONFIGURATION.md its meaning.
DECLARED = {
    "DEFAULT_MAX_ATTEMPTS": _setting(
        3, MAX_ATTEMPTS, "attempts a job gets unless its task or the caller says otherwise"
    ),
    "RETRY_BACKOFF_BASE": _setting(
        2.0, Seconds("RETRY_BACKOFF_BASE", DAY), "retry backoff: base * 2 ** (attempt - 1) seconds"
    ),
    "RETRY_BACKOFF_MAX": _setting(
        3600.0,
        Seconds("RETRY_BACKOFF_MAX", bounds.TIMEOUT_MAX),
        "the longest retry backoff (seconds) before its jitter",
    ),
    "RETRY_JITTER": _setting(
        0.25, Fraction("RETRY_JITTER"), "a retry's backoff varies by up to this fraction either way"
    ),
    "RETENTION": _setting(
        {"succeeded": timedelta(days=14), "failed": timedelta(days=30), "cancelled": timedelta(days=30)},
        Retention("RETENTION"),
        "how long finished jobs are kept, by status (dispatchers prune; so does purgejobs without --older-than)",
        "E004",
    ),
    "CONCURRENCY": _setting(
        4, WholeNumber("CONCURRENCY", 1, bounds.CONCURRENCY_MAX), "slots of a dispatcher without --queue"
    ),
    "HORIZON": _setting(300.0, Seconds("HORIZON", bounds.HORIZON_MAX), "seconds of future jobs mirrored in the heap"),
    "HEAP_CAP": _setting(20_000, WholeNumber("HEAP_CAP", 1, bounds.HEAP_CAP_MAX), "most pending jobs the heap holds"),
    "POLL_INTERVAL": _setting(
        1.0, Seconds("POLL_INTERVAL", bounds.POLL_INTERVAL_MAX), "seconds between change polls (the fallback)"
    ),
    "SQLITE_CHANGE_CHECK": _setting(
        0.02,
        Seconds("SQLITE_CHANGE_CHECK", bounds.SQLITE_CHANGE_CHECK_MAX, zero_ok=True),
        "SQLite: seconds between checks of PRAGMA data_version (a commit elsewhere brings the poll forward); 0: off",
    ),
    "FULL_SYNC_INTERVAL": _setting(
        30.0, Seconds("FULL_SYNC_INTERVAL", DAY), "seconds between full reloads of the window"
    ),
    "SYNC_OVERLAP": _setting(
        2.0, Seconds("SYNC_OVERLAP", bounds.POLL_INTERVAL_MAX, zero_ok=True), "seconds the change poll reaches back"
    ),
    "LEASE": _setting(30.0, Seconds("LEASE", bounds.LEASE_MAX), "seconds a claim is good for without a heartbeat"),
    "CANCEL_GRACE": _setting(
        5.0,
        Seconds("CANCEL_GRACE", bounds.GRACE_MAX, zero_ok=True),
        "process queues: seconds a running job whose cancel was requested gets to stop before its worker process "
        "is terminated (SIGTERM, then SIGKILL 2 s later); thread queues stay cooperative",
    ),
    "GRACE": _setting(
        30.0, Seconds("GRACE", bounds.GRACE_MAX, zero_ok=True), "seconds running jobs get to finish on shutdown"
    ),
    "MAX_ABANDONED_THREADS": _setting(
        8, WholeNumber("MAX_ABANDONED_THREADS", 0, bounds.CONCURRENCY_MAX), "timed-out threads allowed to linger"
    ),
    "DEAD_AFTER_LEASES": _setting(
        2,
        WholeNumber("DEAD_AFTER_LEASES", 1, bounds.DEAD_AFTER_LEASES_MAX),
        "a dispatcher is dead when its heartbeat is this many leases old",
    ),
    "PRUNE_BATCH": _setting(
        1000, WholeNumber("PRUNE_BATCH", 1, bounds.PRUNE_BATCH_MAX), "finished jobs deleted per statement when pruning"
    ),
    "NOTIFY_CHANNEL": _setting(
        "scheduler_app_jobs",
        ChannelName("NOTIFY_CHANNEL"),
        "PostgreSQL: the NOTIFY channel of the dispatchers' wake-ups",
    ),
    "SYNCHRONOUS_COMMIT": _setting(
        True,
        Flag("SYNCHRONOUS_COMMIT"),
        "PostgreSQL: wait for the WAL flush of the dispatcher's claims and results (False: faster; docs/CONFIGURATION.md)",
    ),
    "SCHEDULE_MISFIRE_GRACE": _setting(
        30.0,
        Seconds("SCHEDULE_MISFIRE_GRACE", bounds.HORIZON_MAX, zero_ok=True),
        "a schedule's run this many seconds past its time is missed",
    ),
    "SCHEDULE_CATCH_UP_MAX": _setting(
        10,
        WholeNumber("SCHEDULE_CATCH_UP_MAX", 1, bounds.SCHEDULE_CATCH_UP_MAX),
        "most jobs a catch_up schedule makes for missed runs",
    ),
    "QUEUES": _setting(
        {},
        QueueSettings("QUEUES"),
        "per-queue limits and mode, seeding a queue's row when first seen: {name: {concurrency_limit, rate_limit, rate_period, mode}}",
        "E011",
    ),
    "ROUTES": _setting(
        [],
        ROUTES,
        'a task path or glob -> {"queue", "priority"} its jobs get when neither the caller nor the task\'s code '
        'chooses them; the first match wins: {"billing.tasks.*": {"queue": "billing"}}',
        "E012",
    ),
    "MAX_SNOOZES": _setting(
        100, WholeNumber("MAX_SNOOZES", 0, bounds.MAX_SNOOZES_MAX), "snoozes a job may take before one fails it"
    ),
    "TASK_MODULES": _setting(
        [],
        TextList("TASK_MODULES", "dotted module paths"),
        "modules of installed apps whose @task functions are registered besides each app's tasks module",
    ),
    "RUN_COMMAND_ALLOWED": _setting(
        [],
        TextList("RUN_COMMAND_ALLOWED", "management command names"),
        "management commands the built-in run_command task may run (a job of any other is refused when made)",
    ),
    "ARGS_MAX_BYTES": _setting(
        1024 * 1024,
        WholeNumber("ARGS_MAX_BYTES", bounds.VALUE_BYTES_MIN, bounds.VALUE_BYTES_MAX),
        "bytes of a job's args and kwargs together (compact UTF-8 JSON); a larger job is refused",
    ),
    "RESULT_MAX_BYTES": _setting(
        1024 * 1024,
        WholeNumber("RESULT_MAX_BYTES", bounds.VALUE_BYTES_MIN, bounds.VALUE_BYTES_MAX),
        "bytes of a task's return value (compact UTF-8 JSON); a larger one fails its attempt",
    ),
    "WEBHOOK_ALLOWED_HOSTS": _setting(
        [],
        TextList("WEBHOOK_ALLOWED_HOSTS", "hosts with optional ports", _host_shape),
        "host or host:port entries call_webhook may reach on non-public addresses (a bare host: ports 80 and 443)",
        "E006",
    ),
    "WEBHOOK_TIMEOUT": _setting(
        10.0,
        Seconds("WEBHOOK_TIMEOUT", bounds.WEBHOOK_TIMEOUT_MAX),
        "seconds for call_webhook's whole exchange, however slowly the peer sends",
        "E006",
    ),
    "WEBHOOK_MAX_BODY": _setting(
        64 * 1024,
        WholeNumber("WEBHOOK_MAX_BODY", 0, bounds.WEBHOOK_MAX_BODY_MAX),
        "bytes of a webhook answer's body kept in the result",
        "E006",
    ),
    "EMAIL_FROM_ALLOWED": _setting(
        [],
        TextList("EMAIL_FROM_ALLOWED", "email addresses"),
        "From addresses send_email may use besides DEFAULT_FROM_EMAIL",
    ),
    "JOB_LOG_LEVEL": _setting(
        "INFO", LogLevel("JOB_LOG_LEVEL"), "records a job's own thread logs at this level and up are kept"
    ),
    "JOB_LOG_MAX_RECORDS": _setting(
        200,
        WholeNumber("JOB_LOG_MAX_RECORDS", 0, bounds.JOB_LOG_RECORDS_MAX),
        "log records kept per attempt; 0 keeps none",
    ),
    "JOB_LOG_MAX_BYTES": _setting(
        64 * 1024,
        WholeNumber("JOB_LOG_MAX_BYTES", 0, bounds.JOB_LOG_BYTES_MAX),
        "bytes of log text kept per attempt (UTF-8)",
    ),
    "ROLLUP_INTERVAL": _setting(
        60.0,
        Seconds("ROLLUP_INTERVAL", bounds.POLL_INTERVAL_MAX, zero_ok=True),
        "seconds between a dispatcher's writes of its per-minute history; 0: none",
    ),
    "ROLLUP_RETENTION": _setting(
        timedelta(days=7), Age("ROLLUP_RETENTION", bounds.RETENTION_MAX), "how long the per-minute history is kept"
    ),
    "REQUEST_STATEMENT_TIMEOUT": _setting(
        30.0,
        Seconds("REQUEST_STATEMENT_TIMEOUT", bounds.REQUEST_STATEMENT_TIMEOUT_MAX, zero_ok=True),
        "seconds one SQL statement of an admin page or API request of the scheduler may run before the "
        "database cancels it (API: 503, admin: a message); 0: no bound. The dispatcher is not bound by it",
    ),
    "FILTER_ARGUMENTS": _setting(
        list(FILTERED_NAMES),
        TextList("FILTER_ARGUMENTS", "keyword-argument names"),
        "keyword arguments (any depth, any case) whose values pages, the API, search, logs and the audit show as "
        "[FILTERED]; tasks still get the real values",
    ),
    "AUDIT_RETENTION": _setting(
        timedelta(days=90),
        Age("AUDIT_RETENTION", bounds.RETENTION_MAX),
        "how long audit events (who did what) are kept; the maintenance leader prunes older ones",
    ),
    "METRICS_TOKEN": _setting(
        None, Secret("METRICS_TOKEN"), "GET /metrics also answers 'Authorization: Bearer <this>'; None: staff only"
    ),
}

# settings.SCHEDULER key -> its rule.
SETTINGS = {name: setting.rule for name, setting in DECLARED.items()}


# rundispatcher's options that are not settings.
MAX_JOBS = WholeNumber("max_jobs", 1, bounds.MAX_JOBS_MAX)
PROCESSES = WholeNumber("processes", 1, bounds.PROCESSES_MAX)
