"""The scheduler's settings: ``settings.SCHEDULER`` over these defaults.

Read them through :func:`get`, never at import time, so tests can override
settings.
"""

from datetime import timedelta

from django.conf import settings
from django.core.signals import setting_changed

from .vocabulary.bounds import QUEUE_NAME_RE

DEFAULTS = {
    # Attempts a job gets unless its task or the caller says otherwise.
    "DEFAULT_MAX_ATTEMPTS": 3,
    # Retry backoff: base * 2 ** (attempt - 1), capped, with +-JITTER fraction.
    "RETRY_BACKOFF_BASE": 2.0,
    "RETRY_BACKOFF_MAX": 3600.0,
    "RETRY_JITTER": 0.25,
    # Retention of finished jobs, applied by every dispatcher's housekeeping
    # and by `manage.py purgejobs` without --older-than.
    "RETENTION": {
        "succeeded": timedelta(days=14),
        "failed": timedelta(days=30),
        "cancelled": timedelta(days=30),
    },
    # Dispatcher defaults (each has a command-line option too).
    "CONCURRENCY": 4,
    "HORIZON": 300.0,  # seconds of future jobs mirrored in the heap
    "HEAP_CAP": 20_000,  # most pending jobs the heap holds
    "POLL_INTERVAL": 1.0,  # seconds between change polls (the fallback)
    # SQLite only: seconds between checks of PRAGMA data_version (did another
    # process commit?); a change brings the poll forward. 0 turns it off.
    "SQLITE_CHANGE_CHECK": 0.02,
    "FULL_SYNC_INTERVAL": 30.0,  # seconds between full reloads (the backstop)
    "SYNC_OVERLAP": 2.0,  # seconds the change poll reaches back
    "LEASE": 30.0,  # seconds a claim is good for without a heartbeat
    "GRACE": 30.0,  # seconds running jobs get to finish on shutdown
    "MAX_ABANDONED_THREADS": 8,  # timed-out threads allowed to linger
    # A worker is dead when its heartbeat is older than this many leases.
    "DEAD_AFTER_LEASES": 2,
    "PRUNE_BATCH": 1000,
    "NOTIFY_CHANNEL": "scheduler_app_jobs",
    # PostgreSQL: wait for the WAL flush when the dispatcher commits claims
    # and results. False is ~10 % faster (docs/BENCHMARKS.md, step 8) and
    # risks the last ~0.6 s of those commits on a *PostgreSQL server* crash:
    # finished jobs run again, and a job whose claim was lost can be claimed
    # by another dispatcher while its first attempt still runs (README).
    # Enqueues, cancels etc. stay durable.
    "SYNCHRONOUS_COMMIT": True,
    # Schedules: a run this many seconds past its time is missed (the misfire
    # policy decides), and a "catch_up" schedule makes at most this many jobs.
    "SCHEDULE_MISFIRE_GRACE": 30.0,
    "SCHEDULE_CATCH_UP_MAX": 10,
    # Per-queue defaults: {"emails": {"concurrency_limit": 5, "rate_limit": 100,
    # "rate_period": 60, "mode": "thread"}}. They seed a queue's row when the
    # queue is first seen; after that the row (admin, PATCH /api/queues/{name}/) wins.
    "QUEUES": {},
    # How many times a job may snooze (raise Snooze) before the next snooze
    # fails its attempt ("snoozed too often").
    "MAX_SNOOZES": 100,
    # Dotted paths of modules (inside installed apps) whose @task functions
    # are registered, besides each installed app's `tasks` module.
    "TASK_MODULES": [],
    # Management commands the built-in `run_command` task may run; a job of
    # any other is refused when it is made (and again when it runs).
    "RUN_COMMAND_ALLOWED": [],
    # Bytes of a job's arguments (args and kwargs together, as compact UTF-8
    # JSON): a larger job is refused when it is made.
    "ARGS_MAX_BYTES": 1024 * 1024,
    # Bytes of a task's return value (compact UTF-8 JSON): a larger one fails
    # its attempt.
    "RESULT_MAX_BYTES": 1024 * 1024,
    # The built-in `call_webhook` task refuses loopback, private, link-local,
    # multicast, reserved and unspecified addresses unless the URL's host and
    # port are listed here: "host" allows ports 80 and 443 only, "host:port"
    # that port only (hosts as written in URLs: "hooks.internal",
    # "hooks.internal:8080", "[fd00::5]:8443"). Public addresses need no entry.
    "WEBHOOK_ALLOWED_HOSTS": [],
    # Seconds for the whole exchange (lookup, connect, TLS, status line,
    # headers, 1xx answers, body, trailers), however slowly the peer sends;
    # a job may ask for less.
    "WEBHOOK_TIMEOUT": 10.0,
    "WEBHOOK_MAX_BODY": 64 * 1024,  # bytes of the answer's body kept in the result
    # The built-in `send_email` task sends from DEFAULT_FROM_EMAIL; a job may
    # name another From address only if it is listed here.
    "EMAIL_FROM_ALLOWED": [],
    # Per-job logs: records a job's own thread emits while it runs, at this
    # level and above (a name or a number), kept with the attempt; at most
    # this many records and bytes per attempt (then one "N more records
    # dropped" line). JOB_LOG_MAX_RECORDS = 0 keeps none.
    "JOB_LOG_LEVEL": "INFO",
    "JOB_LOG_MAX_RECORDS": 200,
    "JOB_LOG_MAX_BYTES": 64 * 1024,
    # History: dispatchers add their per-minute rollups to the database this
    # often (seconds; 0 turns rollups off), and they are kept this long.
    "ROLLUP_INTERVAL": 60.0,
    "ROLLUP_RETENTION": timedelta(days=7),
    # GET /metrics: besides staff with view_job, whoever sends
    # "Authorization: Bearer <this>". None: staff only.
    "METRICS_TOKEN": None,
}


def scheduler_backends():
    """Return the ``settings.TASKS`` backends that enqueue into this scheduler."""
    from django.tasks import task_backends

    return [b for b in task_backends.all() if getattr(b, "is_scheduler_backend", False)]


def backend_options():
    """Return the OPTIONS of the scheduler's first task backend (the defaults of jobs made outside django.tasks)."""
    backends = scheduler_backends()
    return dict(backends[0].options) if backends else {}


def known_queues():
    """Return the names of the queues the scheduler's task backends serve (a frozenset).

    A name that does not match ``limits.QUEUE_NAME_PATTERN`` is left out: it
    could not be part of a URL (the dashboard's pause links). The system
    check ``scheduler_app.E001`` reports it at start-up. Kept until
    ``settings.TASKS`` changes: every enqueue asks.
    """
    if _known_queues is None:
        queues = set()
        for backend in scheduler_backends():
            queues |= {q for q in backend.queues if isinstance(q, str) and QUEUE_NAME_RE.fullmatch(q)}
        _set_known_queues(frozenset(queues))
    return _known_queues


_known_queues = None


def _set_known_queues(value):
    global _known_queues
    _known_queues = value


def _forget(*, setting, **kwargs):
    if setting == "TASKS":
        _set_known_queues(None)


setting_changed.connect(_forget, dispatch_uid="scheduler_app.conf")


def queue_defaults(name):
    """Return the limits ``SCHEDULER["QUEUES"]`` gives queue ``name`` (no limit where it says nothing)."""
    entry = (get("QUEUES") or {}).get(name) or {}
    return {
        "concurrency_limit": entry.get("concurrency_limit"),
        "rate_limit": entry.get("rate_limit"),
        "rate_period": float(entry.get("rate_period") or 1.0),
    }


def queue_mode(name):
    """Return how ``SCHEDULER["QUEUES"]`` says queue ``name``'s jobs run: "thread" (the default) or "process"."""
    return ((get("QUEUES") or {}).get(name) or {}).get("mode") or "thread"


def get(name):
    """Return the setting ``name`` from settings.SCHEDULER or its default."""
    overrides = getattr(settings, "SCHEDULER", None) or {}
    if name == "RETENTION":
        return {**DEFAULTS["RETENTION"], **overrides.get("RETENTION", {})}
    return overrides.get(name, DEFAULTS[name])
