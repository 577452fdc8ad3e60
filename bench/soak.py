"""Soak: several dispatchers under faults; count lost jobs and jobs run twice at once.

    .venv/bin/python bench/soak.py                      # kill -9 and a PostgreSQL restart, ~2-3 minutes
    .venv/bin/python bench/soak.py --scenario rolling   # SIGTERM of one dispatcher at a time (a rolling deploy)
    .venv/bin/python bench/soak.py --scenario pause     # SIGSTOP of one for three leases, then SIGCONT
    .venv/bin/python bench/soak.py --jobs 20000 --duration 900

Scenarios (``--scenario``):

* ``kill`` (the default): a random dispatcher is killed with SIGKILL every
  3-6 s and started again; PostgreSQL is restarted once, a third of the way in;
* ``rolling``: every 3-6 s one dispatcher (in turn) gets SIGTERM while the
  others run on, and is started again once it exited; its grace period (1 s)
  is shorter than one job in five, so those are handed back at every stop;
* ``pause``: every 4-8 s a random dispatcher gets SIGSTOP for three lease
  periods, then SIGCONT (its guardian should have killed it by then: it is
  started again).

What it checks (docs/ARCHITECTURE.md, "What the soak checks"), from the
tasks' own records, not from the jobs table:

* **lost**: a job that did not end ``succeeded``, or that has no ``end``
  record of a run: the scheduler lost it;
* **ran twice at once**: two runs of one job whose records interleave in time.
  Each run writes a line every 20 ms while it runs
  (``benchapp.tasks.soak_span``): two runs overlap when one's first line
  comes before the other's last. A second witness: each run holds a per-job
  ``flock`` for its whole life; the kernel drops it only when the holding
  process dies, so a run that finds it taken records a ``lock overlap``;
* **completed more than once**: jobs with several ``end`` records. Allowed
  (at-least-once: a dispatcher killed between a task's end and the write of
  its outcome), reported for information.

The dispatchers serve a thread queue (``soak_t``, 4 slots) and a process queue
(``soak_p``, 2 worker processes), with a short lease so that rescues happen
within the run. At the end every dispatcher gets SIGTERM. Exit status 1 when
anything was lost or ran twice at once.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")


def pg_cluster():
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True).stdout.split()
    return out[0], out[1]


def restart_postgres():
    version, name = pg_cluster()
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"], check=True)


def psql(url, sql):
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else []


class Dispatcher:
    def __init__(self, number, env, log_dir, lease):
        self.number = number
        self.env = env
        self.log_dir = log_dir
        self.lease = lease
        self.process = None
        self.kills = 0

    def start(self, grace=2):
        log = open(self.log_dir / f"dispatcher-{self.number}.log", "a")  # noqa: SIM115 - the dispatcher writes to it
        self.process = subprocess.Popen(
            [
                PY,
                str(ROOT / "manage.py"),
                "rundispatcher",
                "--queue",
                "soak_t:4",
                "--queue",
                "soak_p:2:process",
                "--lease",
                str(self.lease),
                "--grace",
                str(grace),
                "--poll-interval",
                "0.5",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.kills += 1

    def terminate(self):
        """SIGTERM, as a deploy does; wait for the exit; return its code."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def pause(self, seconds):
        """SIGSTOP for ``seconds``, then SIGCONT; return whether it was still alive (its guardian spared it)."""
        self.process.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        if self.process.poll() is not None:
            return False
        self.process.send_signal(signal.SIGCONT)
        return True

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.returncode


def read_records(path):
    """Return ``({key: Counter of record kinds}, {key: [(first tick, last tick)] per run})``."""
    records = defaultdict(lambda: Counter())
    spans = defaultdict(dict)
    for line in path.read_text().splitlines():
        kind, key, run, at = line.split()
        records[key][kind] += 1
        if kind == "tick":
            first, last = spans[key].get(run, (float(at), float(at)))
            spans[key][run] = (min(first, float(at)), max(last, float(at)))
    return records, {key: sorted(runs.values()) for key, runs in spans.items()}


def overlapping(spans):
    """Return whether any two runs' tick spans interleave (sorted by their first tick)."""
    return any(b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--dispatchers", type=int, default=3)
    parser.add_argument("--duration", type=float, default=240.0, help="give up after this many seconds")
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--no-pg-restart", action="store_true")
    parser.add_argument("--scenario", choices=("kill", "rolling", "pause"), default="kill")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--database", default=os.environ.get("SOAK_DATABASE", "scheduler_soak"))
    args = parser.parse_args()
    rng = random.Random(args.seed)

    base = os.environ.get("SOAK_PG", "postgres://postgres@127.0.0.1:5432")
    psql(f"{base}/postgres", f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)")
    psql(f"{base}/postgres", f"CREATE DATABASE {args.database}")
    soak_dir = Path(tempfile.mkdtemp(prefix="soak-"))
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{args.database}",
        "DJANGO_SETTINGS_MODULE": "bench.settings_soak",
        "SOAK_DIR": str(soak_dir),
        "SCHEDULER_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    subprocess.run([PY, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    enqueue = (
        "import random, sys\n"
        "from scheduler_app import enqueue_many\n"
        f"rng = random.Random({args.seed!r})\n"
        f"n = {args.jobs}\n"
        # Most runs are short; one in ten outlives the lease, as a run orphaned
        # by a killed dispatcher would while its job is rescued and run again.
        "def seconds():\n"
        f"    return round(rng.uniform(0.5, 2.0) * {args.lease} if rng.random() < 0.1 else rng.uniform(0.05, 0.4), 3)\n"
        "enqueue_many([{'task': 'bench.benchapp.tasks.soak_span', 'kwargs': {'key': f'j{i}', "
        "'seconds': seconds()}, 'queue': 'soak_t' if i % 2 else 'soak_p', "
        "'max_attempts': 100} for i in range(n)])\n"
    )
    subprocess.run([PY, str(ROOT / "manage.py"), "shell", "-c", enqueue], cwd=ROOT, env=env, check=True)

    logs = ROOT / "bench" / "results" / "soak-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    dispatchers = [Dispatcher(i, env, logs, args.lease) for i in range(args.dispatchers)]
    # A rolling deploy's grace is shorter than the longer jobs: they are handed back at each stop.
    grace = 1 if args.scenario == "rolling" else 2
    for d in dispatchers:
        d.start(grace)
    started = time.monotonic()
    deadline = started + args.duration
    pg_restart_at = None if args.no_pg_restart or args.scenario != "kill" else started + min(args.duration / 3, 40)
    pg_restarts = 0
    faults = Counter()
    turn = 0
    next_kill = started + rng.uniform(3, 6)
    url = env["DATABASE_URL"]
    print(f"soak: {args.jobs} jobs, {args.dispatchers} dispatchers, records in {soak_dir}, logs in {logs}", flush=True)
    remaining = args.jobs
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = time.monotonic()
        if pg_restart_at is not None and now >= pg_restart_at:
            print("soak: restarting PostgreSQL", flush=True)
            restart_postgres()
            pg_restarts += 1
            pg_restart_at = None
        if now >= next_kill:
            if args.scenario == "kill":
                victim = rng.choice(dispatchers)
                victim.kill()
                faults["sigkill"] += 1
            elif args.scenario == "rolling":
                victim = dispatchers[turn % len(dispatchers)]
                turn += 1
                faults[f"sigterm exit {victim.terminate()}"] += 1
            else:
                victim = rng.choice(dispatchers)
                survived = victim.pause(3 * args.lease)
                faults["sigstop, survived" if survived else "sigstop, killed by its guardian"] += 1
                if survived:
                    next_kill = time.monotonic() + rng.uniform(4, 8)
                    continue
                victim.process.wait()
            victim.start(grace)
            next_kill = time.monotonic() + rng.uniform(3, 6 if args.scenario != "pause" else 8)
        try:
            remaining = psql(
                url, "SELECT count(*) FROM scheduler_app_job WHERE status IN ('pending', 'running', 'waiting')"
            )[0][0]
        except Exception:  # noqa: BLE001 - PostgreSQL restarting
            continue
        if remaining == 0:
            break
    # Let whatever was rescued last finish, without more kills.
    settle_until = time.monotonic() + 4 * args.lease + 10
    while remaining and time.monotonic() < settle_until:
        time.sleep(0.5)
        remaining = psql(
            url, "SELECT count(*) FROM scheduler_app_job WHERE status IN ('pending', 'running', 'waiting')"
        )[0][0]
    exits = [d.stop() for d in dispatchers]
    elapsed = time.monotonic() - started

    statuses = dict(psql(url, "SELECT status, count(*) FROM scheduler_app_job GROUP BY status"))
    keys = {row[0]: row[1] for row in psql(url, "SELECT kwargs->>'key', status FROM scheduler_app_job")}
    records, spans = read_records(soak_dir / "records.log")
    not_succeeded = sorted(k for k, status in keys.items() if status != "succeeded")
    never_ended = sorted(k for k in keys if records[k]["end"] == 0)
    overlaps = sorted(k for k in keys if overlapping(spans.get(k, [])))
    lock_overlaps = sorted(k for k in keys if records[k]["overlap"])
    repeated = sum(1 for k in keys if records[k]["end"] > 1)
    report = {
        "scenario": args.scenario,
        "jobs": args.jobs,
        "dispatchers": args.dispatchers,
        "seconds": round(elapsed, 1),
        "faults": dict(faults),
        "postgres_restarts": pg_restarts,
        "statuses": statuses,
        "lost": len(set(not_succeeded) | set(never_ended)),
        "ran_twice_at_once": len(overlaps),
        "lock_overlaps": len(lock_overlaps),
        "completed_more_than_once": repeated,
        "runs": sum(r["start"] for r in records.values()),
        "exit_codes": exits,
        "examples": {
            "lost": (not_succeeded + never_ended)[:10],
            "ran_twice_at_once": overlaps[:10],
            "lock_overlaps": lock_overlaps[:10],
        },
    }
    print(json.dumps(report, indent=2))
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    name = "soak.json" if args.scenario == "kill" else f"soak-{args.scenario}.json"
    (results / name).write_text(json.dumps(report, indent=2))
    shutil.rmtree(soak_dir, ignore_errors=True)
    psql(f"{base}/postgres", f"DROP DATABASE IF EXISTS {args.database} WITH (FORCE)")
    return 1 if report["lost"] or report["ran_twice_at_once"] or report["lock_overlaps"] else 0


if __name__ == "__main__":
    sys.exit(main())
