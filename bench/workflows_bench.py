"""What creating a workflow costs: 10,000 jobs as a workflow against the same jobs as plain ``enqueue_many``.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_workflows .venv/bin/python bench/workflows_bench.py

Creates the database if it is missing (PostgreSQL), migrates it, then, with
the jobs table emptied before each repetition, times (median of ``--reps``):

- ``plain``: ``enqueue_many`` of N independent jobs (one transaction);
- ``group``: ``group(N steps).enqueue()``: the same jobs as one workflow;
- ``plain chain``: ``enqueue_many`` of N jobs, each depending on the one
  before (``depends_on_index``): the cost of the links alone;
- ``chain``: ``chain(N steps).enqueue()``: the same links as one workflow,
  each step receiving the previous result (``pass_results``).

The overhead per job of a workflow is ``(group - plain) / N`` and
``(chain - plain chain) / N``. Prints one JSON line per measurement and a table.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_ours")

TASK = "bench.benchapp.tasks.noop"


def ensure_database():
    import psycopg

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def empty():
    from django.db import connection

    from scheduler_app.models import Job, JobDependency, Workflow

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tables = ", ".join(m._meta.db_table for m in (JobDependency, Job, Workflow))
            cursor.execute(f"TRUNCATE {tables} CASCADE")
        else:
            for model in (JobDependency, Job, Workflow):
                cursor.execute(f"DELETE FROM {model._meta.db_table}")


def timed(make):
    empty()
    start = time.perf_counter()
    make()
    return time.perf_counter() - start


def measurements(n):
    from scheduler_app.lifecycle import enqueue_many
    from scheduler_app.workflows import chain, group, step

    return {
        "plain": lambda: enqueue_many([{"task": TASK, "args": [i]} for i in range(n)]),
        "group": lambda: group(*[step(TASK, i) for i in range(n)]).enqueue(name="bench"),
        "plain chain": lambda: enqueue_many(
            [{"task": TASK, "args": [i], **({"depends_on_index": [i - 1]} if i else {})} for i in range(n)]
        ),
        "chain": lambda: chain(*[step(TASK, i) for i in range(n)]).enqueue(name="bench"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    options = parser.parse_args()
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    for make in measurements(100).values():  # warm up: first statements, caches
        timed(make)
    cases = measurements(options.n)
    seconds = {name: [] for name in cases}
    for _ in range(options.reps):
        for name, make in cases.items():  # interleaved: drift spreads over every case
            seconds[name].append(timed(make))
    empty()
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, values in seconds.items():
        print(json.dumps({"case": name, "n": options.n, "db": connection.vendor, "seconds": values}))
    print(f"\n{options.n:,} jobs on {connection.vendor}, median of {options.reps}")
    print(f"{'case':<12} {'total s':>9} {'µs/job':>8}")
    for name, value in medians.items():
        print(f"{name:<12} {value:>9.3f} {value / options.n * 1e6:>8.1f}")
    for workflow, plain in (("group", "plain"), ("chain", "plain chain")):
        extra = (medians[workflow] - medians[plain]) / options.n * 1e6
        print(f"workflow overhead ({workflow} vs {plain}): {extra:+.1f} µs/job")


if __name__ == "__main__":
    main()
