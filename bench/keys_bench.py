"""The claim's cost with concurrency keys, next to the plain claim (issue 26).

    .venv/bin/python bench/keys_bench.py                   # SQLite (a throwaway file)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scheduler .venv/bin/python bench/keys_bench.py

Each row times a claim of 4 due jobs by query, on the dispatcher's store
and its own connection (as ``bench/drivers/ours.py claim_cost`` does), from
a queue holding ``--n`` due jobs; every claimed attempt is released back to
pending at once, so each claim sees the same backlog. A throwaway test
database is made and dropped. Rows:

- ``keyless queue, plain claim``: the fast path, jobs without a key (run
  this script on a checkout before the keys to compare: the same row);
- ``keyless queue + N keyed jobs ahead, plain claim``: the plain claim walks
  past keyed rows that come first in claim order (they are the keyed
  claim's);
- ``keyed queue (N keys, limit 1), keyed claim``: every job has its own key;
- ``keyed queue (one key at its limit ahead of 100 other keys), keyed claim``:
  one key with a backlog of N, held (one of its jobs runs), the others free.

``--json``: one JSON object (every row's claim times) instead of the table,
which ``bench/run.py --only keys`` reads through ``measure()`` below;
``render()`` is its section of docs/BENCHMARKS.md.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

NOOP = "tests.testapp.tasks.noop"


def timed(claim, release, repeat, warmup):
    times = []
    for i in range(warmup + repeat):
        now = time.time()
        started = time.perf_counter()
        jobs = claim(now)
        elapsed = (time.perf_counter() - started) * 1000
        assert len(jobs) == 4, len(jobs)
        release(jobs, now)
        if i >= warmup:
            times.append(elapsed)
    return times


def put_back(store):
    """``store.release`` for claim-timing loops, then the attempts taken back at once.

    Released attempts stay unclaimable until their dispatcher's process is
    gone (``lifecycle.take_back``); this process runs none of them, so they
    are put back to pending here, where the lifecycle has that step.
    """
    from datetime import UTC, datetime

    from scheduler_app import sql

    def release(jobs, now):
        store.release(jobs, now)
        if hasattr(sql, "take_back"):
            sql.take_back([job.id for job in jobs], now=datetime.fromtimestamp(now, tz=UTC))

    return release


# The rows' stable ids (results keys), in order, with the table's short labels.
ROWS = {
    "keyless": "keyless queue, plain claim",
    "keyed_ahead": "keyless queue + N keyed jobs ahead, plain claim",
    "keyed": "keyed queue (N keys, limit 1), keyed claim",
    "hot_key": "keyed queue (one key at its limit, N of it ahead of 100 other keys), keyed claim",
}


def scenarios(n):
    """Return ``[(id, name, job specs, claim kind, jobs to make running first)]``."""
    keyless = [{"task": NOOP}] * n
    ahead = [{"task": NOOP, "concurrency_key": f"k{i}", "priority": 10} for i in range(n)]
    own_keys = [{"task": NOOP, "concurrency_key": f"k{i}"} for i in range(n)]
    hot = [{"task": NOOP, "concurrency_key": "hot", "priority": 10} for _ in range(n)]
    others = [{"task": NOOP, "concurrency_key": f"k{i}"} for i in range(100)]
    return [
        ("keyless", "keyless queue, plain claim", keyless, "plain", 0),
        ("keyed_ahead", f"keyless queue + {n:,} keyed jobs ahead, plain claim", keyless + ahead, "plain", 0),
        ("keyed", f"keyed queue ({n:,} keys, limit 1), keyed claim", own_keys, "keyed", 0),
        (
            "hot_key",
            f"keyed queue (one key at its limit, {n:,} of it ahead of 100 other keys), keyed claim",
            hot + others,
            "keyed",
            1,
        ),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print one JSON object (for bench/run.py)")
    args = parser.parse_args()
    # KEYS_BENCH_ROOT: another checkout to measure (the plain claim before the keys, for one).
    sys.path.insert(0, str(os.environ.get("KEYS_BENCH_ROOT") or HERE))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args):
    from django.db import connection

    from scheduler_app import lifecycle
    from scheduler_app.models import Job
    from scheduler_app.runtime.store import DjangoStore

    if not args.json:
        print(f"{connection.vendor}: claim of 4 due jobs by query, {args.repeat} claims per row (ms)")
        print(f"{'scenario':<90} {'min':>7} {'p10':>7} {'median':>8} {'p90':>8} {'p99':>8}")
    import inspect

    keys = "concurrency_key" in inspect.signature(lifecycle.build_job).parameters
    rows = {}
    for row, name, specs, kind, running in scenarios(args.n):
        if not keys and (kind == "keyed" or any("concurrency_key" in spec for spec in specs)):
            continue  # a checkout without keys
        Job.objects.all().delete()
        lifecycle.enqueue_many(specs)
        store = DjangoStore("bench-keys", lease=30)
        if running:
            # The hot key's first job runs: its key is at its limit for the whole row.
            store.claim_keyed({"default"}, running, time.time())
        if kind == "plain":
            claim = lambda now, store=store: store.claim({"default"}, 4, now)  # noqa: E731
        elif hasattr(store, "claim_keyed"):
            claim = lambda now, store=store: store.claim_keyed({"default"}, 4, now)[0]  # noqa: E731
        else:
            continue
        times = sorted(timed(claim, put_back(store), args.repeat, args.warmup))
        store.reset()
        rows[row] = {"name": name, "ms": quantiles(times)}
        if not args.json:
            q = rows[row]["ms"]
            print(f"{name:<90} {q['min']:7.3f} {q['p10']:7.3f} {q['median']:8.3f} {q['p90']:8.3f} {q['p99']:8.3f}")
    if args.json:
        print(json.dumps({"db": connection.vendor, "n": args.n, "repeat": args.repeat, "rows": rows}))


def quantiles(times):
    times = sorted(times)
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]  # noqa: E731
    return {"min": times[0], "p10": p(0.1), "median": statistics.median(times), "p90": p(0.9), "p99": p(0.99)}


def measure(ctx, *, python, database_url, log):
    """Run this script (``--json``) against ``database_url``'s server (its throwaway test database)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "KEYS_BENCH_ROOT")}
    done = subprocess.run(
        [python, __file__, "--json", "--n", str(ctx.claim_n), "--repeat", str(ctx.claim_repeat)],
        env=env | {"DATABASE_URL": database_url},
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"{Path(__file__).name} exited {done.returncode}: {done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    out = {}
    for row, entry in raw["rows"].items():
        out[f"pg/{row}"] = entry | {"n": raw["n"], "repeat": raw["repeat"]}
        log(f"  {entry['name']}: {entry['ms']['median']:.3f} ms (median)")
    return out


def render(results, *, table, ms, fmt):
    r = results.get("results", {}).get("keys", {})
    if not r:
        return ""
    first = next(iter(r.values()))
    n = fmt(first.get("n"))
    rows = []
    for row, label in ROWS.items():
        q = (r.get(f"pg/{row}") or {}).get("ms") or {}
        rows.append([re.sub(r"\bN\b", n, label), *(fmt(q.get(k), 2) for k in ("min", "p10", "median", "p90", "p99"))])
    return (
        "### Concurrency keys: the claim's cost\n\n"
        f"PostgreSQL: a claim of 4 due jobs by query on the dispatcher's store and its own connection, from a "
        f"queue holding {n} due jobs, {fmt(first.get('repeat'))} claims per row (each claimed attempt released "
        "at once, so every claim sees the same backlog), ms. The plain claim on a queue without keys is the "
        "reference; on a loaded machine the lower percentiles are the comparable ones (bench/keys_bench.py).\n\n"
        + table(["queue, claim", "min", "p10", "median", "p90", "p99"], rows)
        + "\n"
    )


if __name__ == "__main__":
    main()
