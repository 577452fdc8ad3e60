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
``(chain - plain chain) / N``. Prints one JSON line per measurement and a table
(``--json``: one JSON object instead, which ``bench/run.py --only workflows`` reads
through ``measure()`` below; ``render()`` is its section of docs/BENCHMARKS.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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


CASES = ("plain", "group", "plain chain", "chain")
OVERHEAD = (("group", "plain"), ("chain", "plain chain"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object (for bench/run.py)")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_ours")
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
    if options.json:
        print(json.dumps({"n": options.n, "reps": options.reps, "db": connection.vendor, "seconds": seconds}))
        return
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, values in seconds.items():
        print(json.dumps({"case": name, "n": options.n, "db": connection.vendor, "seconds": values}))
    print(f"\n{options.n:,} jobs on {connection.vendor}, median of {options.reps}")
    print(f"{'case':<12} {'total s':>9} {'µs/job':>8}")
    for name, value in medians.items():
        print(f"{name:<12} {value:>9.3f} {value / options.n * 1e6:>8.1f}")
    for workflow, plain in OVERHEAD:
        extra = (medians[workflow] - medians[plain]) / options.n * 1e6
        print(f"workflow overhead ({workflow} vs {plain}): {extra:+.1f} µs/job")


def measure(ctx, *, python, database_url, summary, log):
    """Run this script (``--json``) on ``database_url``; seconds and µs per job per case."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"} | {"DATABASE_URL": database_url}
    done = subprocess.run(
        [python, __file__, "--json", "--n", str(ctx.workflow_n), "--reps", str(ctx.reps)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"{Path(__file__).name} exited {done.returncode}: {done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    n = raw["n"]
    out = {}
    for name in CASES:
        values = raw["seconds"][name]
        out[f"pg/{name}"] = {"n": n, "s": summary(values), "us_per_job": summary([v / n * 1e6 for v in values])}
        log(f"  {name}: {out[f'pg/{name}']['us_per_job']['median']:.1f} µs/job ({n:,} jobs)")
    return out


def render(results, *, table, ms, fmt):
    r = results.get("results", {}).get("workflows", {})
    if not r:
        return ""
    cfg = results.get("config", {})
    med = {name: (r.get(f"pg/{name}") or {}).get("us_per_job", {}).get("median") for name in CASES}
    rows = []
    for name in CASES:
        entry = r.get(f"pg/{name}") or {}
        extra = pct = ""
        for workflow, plain in OVERHEAD:
            if name == workflow and med[workflow] is not None and med[plain]:
                extra = f"{med[workflow] - med[plain]:+.1f} µs (vs {plain})"
                pct = f"{100 * (med[workflow] / med[plain] - 1):+.0f} %"
        rows.append([f"`{name}`", ms(entry.get("us_per_job"), 1), ms(entry.get("s"), 3), extra, pct])
    n = fmt(next(iter(r.values())).get("n"))
    return (
        f"### Workflows: creating {n} jobs as a workflow\n\n"
        f"PostgreSQL, {n} no-op jobs created in one call, the jobs table emptied before each; "
        f"{cfg.get('reps')} repetition(s), the cases interleaved. `plain`: `enqueue_many` of independent jobs; "
        "`group`: `group(N steps).enqueue()`; `plain chain`: `enqueue_many` with each job depending on the one "
        "before (`depends_on_index`); `chain`: `chain(N steps).enqueue()` (each step passed the previous result). "
        "The overhead per job is the workflow's median against its plain counterpart's "
        "(bench/workflows_bench.py).\n\n"
        + table(["case", "µs per job", "total s", "overhead per job", "overhead %"], rows)
        + "\n"
    )


if __name__ == "__main__":
    main()
