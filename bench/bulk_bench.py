"""What a bulk cancel and retry by filter cost: N jobs (default 100,000) on PostgreSQL.

    .venv/bin/python bench/bulk_bench.py [N]

Makes a scratch database (``<BENCH_DB_PREFIX or bench>_bulk``, dropped at the
end), migrates it, inserts N pending jobs tagged ``incident-42`` with one
statement, then times ``lifecycle.bulk.cancel_matching`` and
``retry_matching`` over the filter ``?tag=incident-42`` (what
``POST /api/jobs/cancel/`` and ``/retry/`` run): keyset batches of
``BULK_BATCH`` ids, each a compare-and-set repeating the filter.
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NAME = (os.environ.get("BENCH_DB_PREFIX") or "bench") + "_bulk"
SERVER = "postgresql://postgres@127.0.0.1:5432/"


def main():
    import psycopg

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with psycopg.connect(SERVER + "postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {NAME}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    os.environ["DATABASE_URL"] = SERVER.replace("postgresql", "postgres") + NAME
    try:
        run(n)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(SERVER + "postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")


def run(n):
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from scheduler_app.lifecycle.bulk import cancel_matching, retry_matching
    from scheduler_app.models import Job

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO scheduler_app_job (task, args, kwargs, queue, priority, execute_at, status, attempts,"
            " max_attempts, errors, cancel_requested, worker, created_at, updated_at, tags, meta)"
            " SELECT 'tests.testapp.tasks.add', '[1, 2]', '{}', 'default', 0, now() + interval '1 hour', 'pending',"
            " 0, 3, '[]', false, '', now(), now(), '[\"incident-42\"]', '{}' FROM generate_series(1, %s)",
            [n],
        )
        cursor.execute("ANALYZE scheduler_app_job")
    jobs = Job.objects.filter(tags__contains=["incident-42"])
    started = time.perf_counter()
    cancelled, requested = cancel_matching(jobs)
    cancel_s = time.perf_counter() - started
    started = time.perf_counter()
    retried = retry_matching(jobs)
    retry_s = time.perf_counter() - started
    print(f"| {n:,} jobs | cancel: {cancelled:,} in {cancel_s:.1f} s | retry: {retried:,} in {retry_s:.1f} s |")


if __name__ == "__main__":
    main()
