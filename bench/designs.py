"""Table designs for the job table, measured against the bare floor (issue 28): raw psycopg, one connection.

Each design runs the dispatcher's hot cycle as ``floor.py`` does (claim a
batch of due jobs with ``FOR UPDATE SKIP LOCKED``, finish it with one
statement, repeat) on a database migrated by the project (the job table as
it is, with every index), changed as the design says, then put back:

* ``bare``: ``floor.py``'s own table (a primary key and the claim index): the
  targets' reference.
* ``project``: the job table as migrated. Since migration 0014 that is the
  lean layout below, adopted (``sql/indexes.py``); step 1's "project" rows in
  docs/BENCHMARKS.md were measured on 0013, with the full list indexes.
* ``lean``: the job table without the indexes only the admin's and the API's
  lists use (``job_queue_id_idx``, ``job_task_id_idx``, ``job_status_id_idx``;
  ``job_created_at_idx`` as BRIN): how much of a claim+finish goes to them.
  On a database migrated to 0014 its drops find nothing left to drop.
* ``narrow``: Solid Queue's ready executions: the claim deletes from a narrow
  ``ready`` table with one index (claim order) and marks the job row running;
  the finish writes the job row (two job-row writes a job, as today).
* ``narrow_lazy``: the same, but the job row is written at the finish only
  (a ``claimed`` table holds the running attempts): the fewest job-row
  writes a design can have, at the price of a status the job row does not
  hold while the job runs.

    python bench/designs.py --dsn postgresql://postgres@127.0.0.1:5432/DB --batch 4 --n 5000 --design lean
    python bench/designs.py --dsn ... --design project --drop job_tags_gin_idx
    python bench/designs.py --dsn ... --design project --entries

``--entries`` rebuilds the job table's indexes on the empty table before the
seed and reports each index's size in pages after the run (before the table
is put back): an index the claims and finishes never wrote stays at its empty
size (a btree's one metapage), which shows which partial indexes a keyless,
workflow-less job's row versions skip. Not for timing (fresh indexes).

The database must be migrated (``manage.py migrate``); the job table is emptied.
"""

import argparse
import json
import time

import psycopg
from floor import BARE, BARE_DDL, CLAIM, FINISH  # bench/ is on the path when run from there
from floor import SEED as BARE_SEED

JOB = "scheduler_app_job"
LIST_INDEXES = ("job_queue_id_idx", "job_task_id_idx", "job_status_id_idx", "job_created_at_idx")

SEED = """
INSERT INTO {table} (task, args, kwargs, queue, priority, execute_at, status, attempts,
    max_attempts, errors, cancel_requested, worker, created_at, updated_at, snoozes, logs_count,
    on_dependency_failure, dependencies_left, has_dependencies, has_dependents)
SELECT 'scheduler_app.demo.tasks.noop', '[]', '{{}}', 'default', 0, now() - interval '1 second',
    'pending', 0, 3, '[]', false, '', now(), now(), 0, 0, 'cancel', 0, false, false
FROM generate_series(1, %s)
"""

READY_DDL = """
DROP TABLE IF EXISTS bench_ready; DROP TABLE IF EXISTS bench_claimed;
CREATE TABLE bench_ready (id bigint PRIMARY KEY, queue varchar(64) NOT NULL, priority smallint NOT NULL,
    execute_at timestamptz NOT NULL);
CREATE INDEX bench_ready_claim_idx ON bench_ready (priority DESC, execute_at, id);
CREATE TABLE bench_claimed (id bigint PRIMARY KEY, worker varchar(100) NOT NULL, lease_expires_at timestamptz NOT NULL);
"""
READY_SEED = f"INSERT INTO bench_ready SELECT id, queue, priority, execute_at FROM {JOB}"
READY_CLAIM = """
WITH c AS (
    SELECT id FROM bench_ready WHERE execute_at <= now() AND queue = ANY(%s)
    ORDER BY priority DESC, execute_at, id LIMIT %s FOR UPDATE SKIP LOCKED),
d AS (DELETE FROM bench_ready r USING c WHERE r.id = c.id RETURNING r.id)
UPDATE scheduler_app_job AS j SET status = 'running', attempts = j.attempts + 1, worker = 'floor',
    lease_expires_at = now() + interval '30 seconds', started_at = now(), updated_at = now()
FROM d WHERE j.id = d.id RETURNING j.id, j.task, j.args, j.kwargs, j.attempts
"""
LAZY_CLAIM = """
WITH c AS (
    SELECT id FROM bench_ready WHERE execute_at <= now() AND queue = ANY(%s)
    ORDER BY priority DESC, execute_at, id LIMIT %s FOR UPDATE SKIP LOCKED),
d AS (DELETE FROM bench_ready r USING c WHERE r.id = c.id RETURNING r.id),
i AS (INSERT INTO bench_claimed SELECT id, 'floor', now() + interval '30 seconds' FROM d RETURNING id)
SELECT j.id, j.task, j.args, j.kwargs, j.attempts + 1 FROM scheduler_app_job j JOIN i ON j.id = i.id
"""
LAZY_FINISH = """
WITH d AS (DELETE FROM bench_claimed WHERE id = ANY(%s) AND worker = 'floor' RETURNING id)
UPDATE scheduler_app_job AS j SET status = 'succeeded', attempts = j.attempts + 1, finished_at = now(),
    updated_at = now(), result = 'null'::jsonb FROM d WHERE j.id = d.id
"""

DESIGNS = ("bare", "project", "lean", "narrow", "narrow_lazy")


def statements(design):
    if design == "bare":
        return CLAIM.format(table=BARE), FINISH.format(table=BARE)
    if design in ("project", "lean"):
        return CLAIM.format(table=JOB), FINISH.format(table=JOB)
    if design == "narrow":
        return READY_CLAIM, FINISH.format(table=JOB)
    return LAZY_CLAIM, LAZY_FINISH


INDEX_PAGES = """
SELECT indexrelname, pg_relation_size(indexrelid) / current_setting('block_size')::int
FROM pg_stat_user_indexes WHERE relname = %s ORDER BY indexrelname
"""


def index_pages(conn):
    return dict(conn.execute(INDEX_PAGES, [JOB]).fetchall())


def prepare(conn, design, n, drop=(), entries=False):
    """Make the design's tables and seed ``n`` due jobs; return a function that puts the job table back.

    ``drop``: more of the job table's indexes to leave out (any design but ``bare``).
    """
    if design == "bare":
        conn.execute(BARE_DDL)
        conn.execute(BARE_SEED.format(table=BARE), [n])
        conn.execute(f"VACUUM ANALYZE {BARE}")
        return lambda: conn.execute(f"DROP TABLE {BARE}")
    conn.execute(f"DELETE FROM {JOB}")
    conn.execute(f"VACUUM {JOB}")
    if entries:
        conn.execute(f"REINDEX TABLE {JOB}")
    saved = []
    if design == "lean" or drop:
        for name in (LIST_INDEXES if design == "lean" else ()) + tuple(drop):
            definition = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name]).fetchone()
            if definition:
                saved.append(definition[0])
                conn.execute(f"DROP INDEX {name}")
        if design == "lean":
            conn.execute(f"CREATE INDEX bench_created_brin ON {JOB} USING brin (created_at)")
    conn.execute(SEED.format(table=JOB), [n])
    if design.startswith("narrow"):
        conn.execute(READY_DDL)
        conn.execute(READY_SEED)
        conn.execute("VACUUM ANALYZE bench_ready")
    conn.execute(f"VACUUM ANALYZE {JOB}")

    def restore():
        conn.execute("DROP INDEX IF EXISTS bench_created_brin")
        for definition in saved:
            conn.execute(definition)
        conn.execute("DROP TABLE IF EXISTS bench_ready; DROP TABLE IF EXISTS bench_claimed")
        conn.execute(f"DELETE FROM {JOB}")

    return restore


def run(dsn, design, batch, n, drop=(), entries=False):
    claim, finish = statements(design)
    pages = None
    with psycopg.connect(dsn, autocommit=True) as conn:
        restore = prepare(conn, design, n, drop, entries)
        try:
            seeded = index_pages(conn) if entries and design != "bare" else None
            done, queues = 0, ["default", "slow"]
            t0 = time.perf_counter()
            while True:
                rows = conn.execute(claim, [queues, batch], prepare=True).fetchall()
                if not rows:
                    break
                conn.execute(finish, [[r[0] for r in rows]], prepare=True)
                done += len(rows)
            elapsed = time.perf_counter() - t0
            if entries and design != "bare":
                pages = {"seeded": seeded, "after_run": index_pages(conn)}
        finally:
            restore()
    result = {
        "design": design,
        "drop": list(drop),
        "batch": batch,
        "n": done,
        "seconds": elapsed,
        "jobs_per_s": done / elapsed,
    }
    if pages:
        result["index_pages"] = pages
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", required=True)
    p.add_argument("--design", choices=DESIGNS, default="project")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--n", type=int, default=5000)
    p.add_argument("--drop", default="", help="comma list of the job table's indexes to leave out too")
    p.add_argument("--entries", action="store_true", help="report each index's pages after the seed and after the run")
    a = p.parse_args()
    drop = [d for d in a.drop.split(",") if d]
    print("RESULT " + json.dumps(run(a.dsn, a.design, a.batch, a.n, drop, a.entries)))
