"""The physical floor: claim a batch with CTE + FOR UPDATE SKIP LOCKED, finish it with one UPDATE.

Raw psycopg, no Django, no threads, against this project's own table
(``scheduler_app_job``, migrated into a bench database). Usage:

    python bench/floor.py --dsn postgresql://postgres@127.0.0.1:5432/bench_floor --batch 4 --n 5000
"""

import argparse
import json
import time

import psycopg

CLAIM = """
WITH c AS (
    SELECT id FROM scheduler_app_job
    WHERE status = 'pending' AND execute_at <= now() AND queue = ANY(%s)
    ORDER BY priority DESC, execute_at, id LIMIT %s
    FOR UPDATE SKIP LOCKED)
UPDATE scheduler_app_job AS j
SET status = 'running', attempts = j.attempts + 1, worker = 'floor',
    lease_expires_at = now() + interval '30 seconds', started_at = now(), updated_at = now()
FROM c WHERE j.id = c.id
RETURNING j.id, j.task, j.args, j.kwargs, j.attempts
"""
FINISH = """
UPDATE scheduler_app_job SET status = 'succeeded', finished_at = now(), updated_at = now(),
    lease_expires_at = NULL, result = 'null'::jsonb
WHERE id = ANY(%s) AND status = 'running' AND worker = 'floor'
"""
SEED = """
INSERT INTO scheduler_app_job (task, args, kwargs, queue, priority, execute_at, status, attempts,
    max_attempts, errors, cancel_requested, worker, created_at, updated_at)
SELECT 'scheduler_app.demo.tasks.noop', '[]', '{}', 'default', 0, now() - interval '1 second',
    'pending', 0, 3, '[]', false, '', now(), now()
FROM generate_series(1, %s)
"""


def run(dsn, batch, n):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM scheduler_app_job")
        conn.execute(SEED, [n])
        conn.execute("VACUUM ANALYZE scheduler_app_job")
        done = 0
        queues = ["default", "slow"]
        t0 = time.perf_counter()
        while True:
            rows = conn.execute(CLAIM, [queues, batch]).fetchall()
            if not rows:
                break
            conn.execute(FINISH, [[r[0] for r in rows]])
            done += len(rows)
        elapsed = time.perf_counter() - t0
    return {"batch": batch, "n": done, "seconds": elapsed, "jobs_per_s": done / elapsed}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--dsn", required=True)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--n", type=int, default=5000)
    a = p.parse_args()
    print("RESULT " + json.dumps(run(a.dsn, a.batch, a.n)))
