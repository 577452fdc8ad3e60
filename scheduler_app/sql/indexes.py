"""The job table's list indexes, laid out so that a claim and a finish write none of them.

Every claim and every finish writes a new version of the job row, and a new
version takes an entry in each index whose predicate it meets (no update is
HOT while ``status`` is in the indexes' predicates): full indexes that serve
only the admin's and the API's lists cost each claim and finish their writes
(docs/BENCHMARKS.md, "Table designs", has the figures). Migration 0014 lays them out so the happy
path (enqueue pending, claim running, finish succeeded) writes none:

- ``job_queue_id_idx`` and ``job_task_id_idx`` are gone: a list filtered by
  queue or task walks the primary key backwards with the filter (the common
  case: the newest matching rows come first) or, for a value with few rows,
  scans (tests/api/test_scale.py bounds both at a million rows).
- ``job_status_id_idx`` holds only the statuses no hot-path index serves,
  ``waiting``, ``failed`` and ``cancelled`` (:data:`LISTED_STATUSES`):
  pending rows are in the pending-only indexes, running rows in the lease
  index, succeeded rows are most of the table (the primary key finds them).
- ``job_created_at_idx`` is a BRIN index on PostgreSQL (the rollups count
  ranges of minutes of an insert-ordered column): a new row version updates
  a page range's summary only when it widens it. SQLite keeps its B-tree.
- ``job_tags_gin_idx`` holds tagged jobs only (``tags <> '[]'``); the tag
  filter states the same predicate (``sql.search.tagged``).

PostgreSQL builds and drops them ``CONCURRENTLY`` (the migration is not
atomic), so an installation's enqueues and claims go on while it migrates.
Each index is dropped before it is built: a build that was interrupted
leaves an invalid index of that name, and running ``migrate`` again
replaces it rather than keeping it.
"""

from functools import reduce
from operator import or_

from django.db.models import Q

from ..vocabulary.jobs import Status

TABLE = "scheduler_app_job"
# The statuses job_status_id_idx holds: those a list asks for that no
# hot-path index serves (see the module's docstring).
LISTED_STATUSES = (Status.WAITING, Status.FAILED, Status.CANCELLED)
# The partial index's predicate on tags, and the same text in the filter.
TAGGED = "tags <> '[]'::jsonb"


def any_status(statuses):
    """Return a condition: the job's status is one of ``statuses``, in a form the partial indexes serve.

    ``status IN (...)`` implies none of the partial indexes' predicates, so
    over the whole table PostgreSQL scans it (the dashboard's counts of the
    active jobs read every finished row of a table of millions). An OR of
    equalities is planned arm by arm: each status by the index that holds it
    (pending: the pending-only indexes, running: the lease index, waiting,
    failed, cancelled: ``job_status_id_idx``), the arms' bitmaps or'ed.
    """
    return reduce(or_, (Q(status=status) for status in statuses))


_listed = ", ".join(f"'{status}'" for status in LISTED_STATUSES)

_POSTGRES_FORWARD = [
    "DROP INDEX CONCURRENTLY IF EXISTS job_queue_id_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS job_task_id_idx",
    "DROP INDEX CONCURRENTLY IF EXISTS job_status_id_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_status_id_idx ON {TABLE} (status, id) WHERE status IN ({_listed})",
    "DROP INDEX CONCURRENTLY IF EXISTS job_created_at_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_created_at_idx ON {TABLE} USING brin (created_at)",
    "DROP INDEX CONCURRENTLY IF EXISTS job_tags_gin_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_tags_gin_idx ON {TABLE} USING gin (tags) WHERE {TAGGED}",
]
_POSTGRES_BACKWARD = [
    "DROP INDEX CONCURRENTLY IF EXISTS job_queue_id_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_queue_id_idx ON {TABLE} (queue, id)",
    "DROP INDEX CONCURRENTLY IF EXISTS job_task_id_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_task_id_idx ON {TABLE} (task, id)",
    "DROP INDEX CONCURRENTLY IF EXISTS job_status_id_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_status_id_idx ON {TABLE} (status, id)",
    "DROP INDEX CONCURRENTLY IF EXISTS job_created_at_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_created_at_idx ON {TABLE} (created_at)",
    "DROP INDEX CONCURRENTLY IF EXISTS job_tags_gin_idx",
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_tags_gin_idx ON {TABLE} USING gin (tags)",
]
_SQLITE_FORWARD = [
    "DROP INDEX IF EXISTS job_queue_id_idx",
    "DROP INDEX IF EXISTS job_task_id_idx",
    "DROP INDEX IF EXISTS job_status_id_idx",
    f"CREATE INDEX IF NOT EXISTS job_status_id_idx ON {TABLE} (status, id) WHERE status IN ({_listed})",
]
_SQLITE_BACKWARD = [
    f"CREATE INDEX IF NOT EXISTS job_queue_id_idx ON {TABLE} (queue, id)",
    f"CREATE INDEX IF NOT EXISTS job_task_id_idx ON {TABLE} (task, id)",
    "DROP INDEX IF EXISTS job_status_id_idx",
    f"CREATE INDEX IF NOT EXISTS job_status_id_idx ON {TABLE} (status, id)",
]


def _run(schema_editor, postgres, sqlite):
    statements = postgres if schema_editor.connection.vendor == "postgresql" else sqlite
    for statement in statements:
        schema_editor.execute(statement)


def lay_out_list_indexes(schema_editor):
    """Migration 0014 forward: the list indexes off the hot path."""
    _run(schema_editor, _POSTGRES_FORWARD, _SQLITE_FORWARD)


def restore_list_indexes(schema_editor):
    """Migration 0014 backward: the full list indexes of 0013."""
    _run(schema_editor, _POSTGRES_BACKWARD, _SQLITE_BACKWARD)
