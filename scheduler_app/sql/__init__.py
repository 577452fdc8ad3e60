"""The database package: raw SQL for the dispatcher's hot transitions, and every vendor branch.

Everything that differs between PostgreSQL and SQLite lives here: SKIP
LOCKED, array parameters, JSON append, NOTIFY, the planner's estimates.
The service and the dispatcher's store ask :func:`dialect` for the
database's ``Dialect`` (``dialect.py``: the declared interface, a PostgreSQL
and an SQLite implementation) and never test the vendor themselves. Each
transition function runs one statement and returns its rows; the
lifecycle service (``scheduler_app.lifecycle``) decides what they mean.

On PostgreSQL there is one statement for finishing and claiming
(:func:`pg_finish_and_claim`), run by the dispatcher on its own connection
as a prepared statement and by everything else on Django's connection.
"""

from .base import (
    CLAIM_COLUMNS,
    NOT_PAUSED_NOR_LIMITED,
    QUEUE_TABLE,
    TABLE,
    Epoch,
    adapt_dt,
    claim_returning,
    estimated_rows,
    estimated_value_counts,
    is_postgres,
    is_sqlite,
    notify,
    vendor,
)
from .bulk import pg_bulk_insert
from .dialect import Dialect, dialect
from .due import any_due
from .expiry import EXPIRED_PREFIX, expire
from .flow import DEPENDENCY_FAILED_CLASS, insert_dependencies, mark_dependencies, settle_dependents, take_unique_window
from .leases import handed_back, release, renew, rescue, take_back
from .limited import pg_limited_claim, pg_limited_claim_text
from .postgres import (
    pg_finish_and_claim,
    pg_finish_and_claim_params,
    pg_finish_and_claim_text,
    pg_insert_and_notify,
    pg_insert_statement,
)
from .sqlite import sqlite_claim, sqlite_finish, sqlite_limited_claim, sqlite_optimize
from .statistics import pg_analyze_if_outgrown

__all__ = [
    "CLAIM_COLUMNS",
    "Dialect",
    "DEPENDENCY_FAILED_CLASS",
    "insert_dependencies",
    "NOT_PAUSED_NOR_LIMITED",
    "QUEUE_TABLE",
    "TABLE",
    "Epoch",
    "adapt_dt",
    "any_due",
    "claim_returning",
    "dialect",
    "EXPIRED_PREFIX",
    "estimated_rows",
    "expire",
    "estimated_value_counts",
    "is_postgres",
    "is_sqlite",
    "mark_dependencies",
    "notify",
    "pg_analyze_if_outgrown",
    "pg_bulk_insert",
    "pg_finish_and_claim",
    "pg_finish_and_claim_params",
    "pg_finish_and_claim_text",
    "pg_insert_and_notify",
    "pg_insert_statement",
    "pg_limited_claim",
    "pg_limited_claim_text",
    "handed_back",
    "release",
    "renew",
    "rescue",
    "settle_dependents",
    "sqlite_claim",
    "sqlite_finish",
    "sqlite_limited_claim",
    "sqlite_optimize",
    "take_back",
    "take_unique_window",
    "vendor",
]
