"""The bounds of a job's fields, in one place.

The lifecycle's validation enforces them (``lifecycle.validation``), the
models' check constraints repeat them to the database, and the API schema
and the admin's help texts quote them. Nothing else states a bound.
"""

from datetime import UTC, datetime

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
# args/kwargs nesting; deeper documents are refused before anything
# recursive (json.dumps, the database's JSON parser) sees them.
JSON_DEPTH_MAX = 64
# The latest instant anything is stored or computed at: Python's datetime
# ends with year 9999, PostgreSQL's timestamps do not.
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
# Jobs per bulk request (API, admin); code may lift it.
BULK_MAX = 1000
