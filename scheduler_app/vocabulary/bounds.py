"""Every bound, in one place: a field's, a setting's, a column's.

The rules enforce them (``validation``), the models' columns and check
constraints repeat them to the database, and the API's schema and filters,
the admin's help texts and the docs strings quote them. Nothing else states
a bound (the house test looks for the numbers).
"""

import re
from datetime import UTC, datetime, timedelta

PRIORITY_MIN = -100
PRIORITY_MAX = 100
MAX_ATTEMPTS_MIN = 1
MAX_ATTEMPTS_MAX = 100
# Seconds an attempt may run, and how far ahead ``delay`` may reach: bounds
# that keep date arithmetic (the dispatcher's too) far from datetime's limits.
TIMEOUT_MAX = 365 * 24 * 3600
DELAY_MAX = 100 * 365 * 24 * 3600
UNIQUE_KEY_MAX = 255
TASK_NAME_MAX = 255
QUEUE_NAME_MAX = 64
# A TASKS alias a job keeps (the django.tasks backend it was enqueued through).
BACKEND_ALIAS_MAX = 100
# Columns: a dispatcher's id (host-pid-random) and host name, a log record's
# logger name and level (a smallint), a schedule's name, cron text and zone.
WORKER_ID_MAX = 100
# A leadership role's name (``Leadership.role``: ``maintenance``).
ROLE_MAX = 32
HOSTNAME_MAX = 255
LOGGER_MAX = 255
LOG_LEVEL_MAX = 32767
SCHEDULE_NAME_MAX = 200
CRON_MAX = 200
ZONE_NAME_MAX = 64
# An audit event's user name (Django's username), action and object id (a queue name at most).
AUDIT_USERNAME_MAX = 150
AUDIT_ACTION_MAX = 32
AUDIT_OBJECT_ID_MAX = QUEUE_NAME_MAX
# A rollup cursor's name (the piece of shared work it tracks).
CURSOR_NAME_MAX = 32
# Characters of a list's ?search= text.
SEARCH_MAX = 255
# Every queue name, wherever it comes from (settings, a request, a command
# line): it goes into URLs, log lines and LISTEN payloads as it is.
QUEUE_NAME_PATTERN = rf"^[A-Za-z0-9_.-]{{1,{QUEUE_NAME_MAX}}}$"
QUEUE_NAME_RE = re.compile(QUEUE_NAME_PATTERN)
# args/kwargs nesting; deeper documents are refused before anything
# recursive (json.dumps, the database's JSON parser) sees them.
JSON_DEPTH_MAX = 64
# A stored JSON document deeper than this (written around the service) reads
# as its text: pages and JSON encoders recurse once per level.
JSON_READ_DEPTH_MAX = 200
# The first and the latest instant anything is stored or computed at.
# Python's datetime holds years 1 to 9999 in any zone, PostgreSQL's
# timestamps far more; a day's margin at each end (no zone is a day or more
# from UTC) lets every page show a stored time in any TIME_ZONE.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
# The shortest non-zero number of seconds any setting or field takes: a
# smaller one (5e-324) rounds to nothing when added to a time.
SECONDS_MIN = 0.001
# How long a unique key stays taken by a job made with ``unique_for``.
UNIQUE_FOR_MAX = 366 * 24 * 3600
# SCHEDULER["ARGS_MAX_BYTES"] and ["RESULT_MAX_BYTES"]: the most each may be
# set to (a job's arguments, an attempt's return value, as compact UTF-8 JSON).
VALUE_BYTES_MIN = 1024
VALUE_BYTES_MAX = 64 * 1024 * 1024
# The job list (GET /api/jobs/) shows at most this many bytes of each job's
# args, kwargs and result; the job's own page shows them whole.
LIST_VALUE_BYTES = 4096
# Jobs one job may depend on (``depends_on``), and a job's dependents its page and representation list.
DEPENDENCIES_MAX = 1000
DEPENDENTS_SHOWN = 100
# A queue's limits: jobs running at once across every dispatcher; jobs
# started per sliding window (each claim counts the window's starts, so a
# window holds at most this many rows) and the window's length.
CONCURRENCY_LIMIT_MAX = 100_000
RATE_LIMIT_MAX = 10_000
RATE_PERIOD_MAX = 24 * 3600
# Snoozes a job may take (SCHEDULER["MAX_SNOOZES"]), and the longest one.
MAX_SNOOZES_MAX = 1_000_000
SNOOZE_MAX = DELAY_MAX
# Jobs per bulk request (API, admin); code may lift it.
BULK_MAX = 1000
# Dependencies (depends_on and depends_on_index entries together) of one
# enqueue_many call: a workflow, a bulk request, a canvas; the API, the admin
# and code alike. It keeps one request's creation to seconds, where a request's
# links can grow as the square of its jobs (docs/SCALING.md has the figures).
LINKS_PER_REQUEST_MAX = 50_000
# GET /api/schedules/{id}/next/?count=: at most this many coming run times
# (default NEXT_RUNS_DEFAULT); the admin's schedule page shows NEXT_RUNS_SHOWN.
NEXT_RUNS_MAX = 100
NEXT_RUNS_DEFAULT = 10
NEXT_RUNS_SHOWN = 5
# Jobs per transaction of a cancel or retry of every job a filter matches
# (POST /api/jobs/cancel/, /retry/; the admin's "all N matching"): no
# request holds locks on more rows, or for longer, than one batch takes.
BULK_BATCH = 1000
# How old finished jobs may get before they are pruned (RETENTION,
# purgejobs --older-than): far enough from year 1 that ``now - age`` exists.
RETENTION_MAX = timedelta(days=1000 * 365)
# The dispatcher's knobs (settings and rundispatcher options), in seconds
# unless named otherwise: beyond these a value is a typo, not a choice.
CONCURRENCY_MAX = 1024
HORIZON_MAX = 366 * 24 * 3600
POLL_INTERVAL_MAX = 3600
LEASE_MAX = 24 * 3600
GRACE_MAX = 24 * 3600
HEAP_CAP_MAX = 10_000_000
MAX_JOBS_MAX = 10**12
SQLITE_CHANGE_CHECK_MAX = 60
DEAD_AFTER_LEASES_MAX = 100
PRUNE_BATCH_MAX = 100_000
SCHEDULE_CATCH_UP_MAX = 1000
# The built-in webhook task: at most this long a wait, this much body kept.
WEBHOOK_TIMEOUT_MAX = 3600
# The longest bound on one statement of a web request (SCHEDULER["REQUEST_STATEMENT_TIMEOUT"]).
REQUEST_STATEMENT_TIMEOUT_MAX = 3600
WEBHOOK_MAX_BODY_MAX = 16 * 1024 * 1024
# Dispatcher processes one supervisor runs (rundispatcher --processes).
PROCESSES_MAX = 64
# Per-job logs: records and bytes one attempt may keep (JOB_LOG_MAX_*).
JOB_LOG_RECORDS_MAX = 100_000
JOB_LOG_BYTES_MAX = 16 * 1024 * 1024
# GET /api/stats/history/?minutes=: up to the rollups' default retention.
HISTORY_MINUTES_MAX = 7 * 24 * 60
# A task's progress report (context.set_progress): numbers up to 2**53 (every
# JSON reader holds them exactly), a message of at most this many characters.
PROGRESS_NUMBER_MAX = 2**53
PROGRESS_MESSAGE_MAX = 1000
# A job's tags (each a short label matching TAG_PATTERN) and its meta (a JSON
# object, compact UTF-8), set at creation.
TAGS_MAX = 20
TAG_MAX = 64
TAG_PATTERN = rf"^[A-Za-z0-9_.:-]{{1,{TAG_MAX}}}$"
TAG_RE = re.compile(TAG_PATTERN)
META_MAX_BYTES = 8 * 1024
# A job's concurrency key (at most concurrency_limit jobs with one key run at
# once, across every dispatcher) and a workflow's name.
CONCURRENCY_KEY_MAX = 255
WORKFLOW_NAME_MAX = 200
