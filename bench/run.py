"""The benchmark harness: this project, its peers and the raw-SQL floor, side by side.

    .venv/bin/python bench/run.py                       # everything (make bench)
    .venv/bin/python bench/run.py --quick               # small N, 1 repetition: harness check
    .venv/bin/python bench/run.py --only throughput,precision --subjects ours,procrastinate --dbs pg
    .venv/bin/python bench/run.py --only peers-new [--quick] --no-docs   # stamp + io: ours and the new peers
    .venv/bin/python bench/run.py --from-json bench/results/X.json --no-docs   # print the tables again

Every subject runs as subprocesses (its own worker command) against its own
database; the harness measures from outside, through the database: the
frameworks' own start/finish columns for throughput, and a shared bench-only
task that records ``time.time()`` as its first statement for timing.
Results: stdout, bench/results/<stamp>.json, docs/BENCHMARKS.md (generated
section, opening with the Targets tables of issues #37, #28 and #15: every target
as a ratio of numbers measured in this run) and docs/SCALING.md (generated
section).
Measurement names for --only: ALL_MEASUREMENTS below; bench/README.md says
what each does.
"""

import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

import psutil
import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
OURS_PY = os.path.join(ROOT, ".venv", "bin", "python")
PEERS_VENV = os.path.join(BENCH, ".venv-peers")
PEERS_PY = os.path.join(PEERS_VENV, "bin", "python")
RESULTS = os.path.join(BENCH, "results")
LOGS = os.path.join(RESULTS, "logs")
PG = "postgresql://postgres@127.0.0.1:5432/"
# Per checkout: two worktrees running the bench at once must not drop each other's databases
# (every run drops and re-creates its own) nor talk to each other's API server (a free port is
# picked per server). BENCH_DB_PREFIX overrides the prefix.
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX") or (
    "bench_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(ROOT).lower())[:24]
)

ALL_MEASUREMENTS = [
    "floor",
    "throughput",
    "stamp",
    "io",
    "logging",
    "joblog",
    "precision",
    "precision_busy",
    "pickup",
    "memory",
    "scale",
    "enqueue",
    "scaling",
    "processes",
    "limits",
    "workflows",
    "keys",
]
# Measurements of this project only, and those run on PostgreSQL only.
OURS_ONLY = {
    "floor",
    "memory",
    "scale",
    "scaling",
    "logging",
    "joblog",
    "precision_busy",
    "processes",
    "limits",
    "workflows",
    "keys",
}
PG_ONLY = {
    "floor",
    "stamp",
    "io",
    "scale",
    "scaling",
    "logging",
    "joblog",
    "precision_busy",
    "processes",
    "limits",
    "workflows",
    "keys",
}
NOOP = "scheduler_app.demo.tasks.noop"  # the task of every throughput run unless said
BENCH_NOOP = "bench.benchapp.tasks.noop"
LOG_ONE = "bench.benchapp.tasks.log_one"
ALL_SUBJECTS = ["ours", "dtdb", "procrastinate", "djangoq"]
# Peers that are not Django apps (bench/drivers/pgpeers.py): measured in ``stamp`` (and pgqueuer in
# ``io``) only. ``--subjects peers-new`` names them all; ``--only peers-new`` runs ``stamp`` and ``io``
# for this project and them.
NEW_PEERS = ["pgqueuer", "oban", "chancy", "dbos"]
SUBJECT_GROUPS = {"peers-new": NEW_PEERS}
MEASUREMENT_GROUPS = {"peers-new": ["stamp", "io"]}
IO_TASK = "bench.benchapp.tasks.io_sleep"  # await asyncio.sleep(0.05)
IO_QUEUE = "io:200:async"  # rundispatcher --queue of the io measurement (--io-queue)
LABEL = {
    "ours": "this project",
    "dtdb": "django-tasks-db 0.13.0",
    "procrastinate": "procrastinate 3.10.0",
    "djangoq": "django-q2 1.11.1 (ORM)",
    "pgqueuer": "pgqueuer 1.6.0",
    "oban": "oban 0.7.0 (Python)",
    "chancy": "chancy 0.26.0",
    "dbos": "DBOS 3.4.0",
}
SQLITE_OK = {"ours", "dtdb", "djangoq"}  # procrastinate is PostgreSQL-only


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# statistics


def pct(values, q):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = (len(v) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary(values):
    """median and min-max of repetitions."""
    v = [x for x in values if x is not None]
    if not v:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def fmt(x, digits=0):
    if x is None:
        return "-"
    if abs(x) >= 100 or digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def fmt_s(s, digits=0):
    if s is None or s["median"] is None:
        return "-"
    if s["n"] == 1:
        return fmt(s["median"], digits)
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


# ---------------------------------------------------------------------------
# databases


def pg_admin(sql):
    with psycopg.connect(PG + "postgres", autocommit=True) as c:
        c.execute(sql)


def fresh_pg(name):
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')


class DB:
    """The harness's own connection to a subject's database (PostgreSQL or SQLite)."""

    def __init__(self, kind, name):
        self.kind, self.name = kind, name
        self.path = f"/tmp/{name}.sqlite3" if kind == "sqlite" else None
        self.conn = None

    @property
    def env_value(self):
        return self.path if self.kind == "sqlite" else self.name

    @property
    def url(self):
        return f"sqlite:///{self.path}" if self.kind == "sqlite" else PG + self.name

    def create(self):
        self.close()
        if self.kind == "pg":
            fresh_pg(self.name)
        else:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.path + suffix):
                    os.remove(self.path + suffix)

    def connect(self):
        if self.conn is None:
            if self.kind == "pg":
                self.conn = psycopg.connect(PG + self.name, autocommit=True)
            else:
                self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
                self.conn.execute("PRAGMA busy_timeout=60000")
        return self.conn

    def q(self, sql, params=()):
        c = self.connect()
        if self.kind == "sqlite":
            sql = sql.replace("%s", "?")
        cur = c.execute(sql, params)
        try:
            return cur.fetchall()
        except Exception:  # noqa: BLE001 - statements without rows
            return []

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def to_epoch(value):
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace(" ", "T"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


# ---------------------------------------------------------------------------
# processes


class Proc:
    """A subprocess in its own session; stopped by its own id (process group)."""

    def __init__(self, argv, env, tag):
        os.makedirs(LOGS, exist_ok=True)
        self.log_path = os.path.join(LOGS, f"{tag}.log")
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - the subprocess writes to it until stop()
        self.started = time.time()
        self.p = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def stop(self, grace=15):
        # Descendants in sessions of their own (rundispatcher --processes starts
        # each dispatcher with start_new_session) are not in our group: they
        # get SIGTERM from their supervisor; any left after the grace is killed
        # by its own id.
        try:
            kids = psutil.Process(self.p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        else:
            # children of a group leader that already exited (django-q2)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.p.pid, signal.SIGKILL)
        _, left = psutil.wait_procs(kids, timeout=grace)
        for k in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                k.kill()
        # Write the log out now: a dispatcher at INFO leaves megabytes of dirty pages whose
        # writeback would otherwise compete with the next run's commits (slowing whatever
        # ran after a default-log-level run).
        self.log.flush()
        os.fsync(self.log.fileno())
        self.log.close()


def run_driver(argv, env, timeout=1800):
    r = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"driver failed ({r.returncode}): {shlex.join(argv)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")


# ---------------------------------------------------------------------------
# subjects


class Subject:
    name = ""
    done_sql = ""
    times_sql = ""
    reset_sql = ()
    variants = ("default", "c4")  # the configurations of ``stamp`` (peers)

    def __init__(self, kind):
        self.kind = kind
        self.db = DB(kind, f"{DB_PREFIX}_{self.name}")

    def env(self, **extra):
        raise NotImplementedError

    def driver(self, *args, env=None, timeout=1800):
        raise NotImplementedError

    def setup(self):
        self.db.create()
        out = self.driver("setup")
        self.reset()
        return out

    def reset(self):
        for sql in self.reset_sql:
            self.db.q(sql)
        self.db.q("DELETE FROM bench_stamp")

    def workers(self, variant, tag):
        """Start the worker(s): variant 'default' or 'c4'; return [Proc]."""
        raise NotImplementedError

    def done(self, since):
        return self.db.q(self.done_sql)[0][0]

    def span(self, since):
        first, last = self.db.q(self.times_sql)[0]
        return to_epoch(first), to_epoch(last)

    def variant_label(self, variant):
        return "default" if variant == "default" else "concurrency 4"

    def stamp_n(self, ctx, variant):
        """N of this peer's ``stamp`` run in ``variant``."""
        return ctx.peer_n_for(self.name)


class Ours(Subject):
    name = "ours"
    reset_sql = ("DELETE FROM scheduler_app_job", "DELETE FROM scheduler_app_worker")
    # Remaining work, not finished rows: the scale test keeps old finished filler rows.
    remaining_sql = "SELECT count(*) FROM scheduler_app_job WHERE status IN ('pending', 'running')"

    def env(self, log_level="WARNING", **extra):
        """The environment of our processes; ``log_level=None`` leaves SCHEDULER_LOG_LEVEL unset
        (the project's settings default)."""
        e = dict(os.environ)
        e.update(DATABASE_URL=self.db.url, DJANGO_SETTINGS_MODULE="bench.settings_ours", PYTHONPATH=ROOT)
        e.pop("SCHEDULER_LOG_LEVEL", None)
        if log_level is not None:
            e["SCHEDULER_LOG_LEVEL"] = log_level
        e.update({k: str(v) for k, v in extra.items()})
        return e

    def driver(self, *args, env=None, timeout=1800):
        return run_driver([OURS_PY, os.path.join(BENCH, "drivers", "ours.py"), *args], env or self.env(), timeout)

    def workers(self, variant, tag, slots=4, count=1, stats_prefix=None, log_level="WARNING", env=None, args=()):
        """``args``: more arguments of ``rundispatcher`` (the io measurement's ``--queue``)."""
        procs = []
        for i in range(count):
            extra = dict(env or {})
            if stats_prefix:
                extra["BENCH_CLAIM_STATS"] = f"{stats_prefix}-{i}.json"
            argv = [OURS_PY, os.path.join(BENCH, "drivers", "ours_dispatch.py"), "--concurrency", str(slots), *args]
            procs.append(Proc(argv, self.env(log_level=log_level, **extra), f"{tag}-{i}"))
        return procs

    def variant_label(self, variant):
        return "4 slots"

    def done(self, since):
        # Used with a known N: done = N - remaining (see throughput()).
        return -self.db.q(self.remaining_sql)[0][0]

    def span(self, since):
        since_dt = datetime.fromtimestamp(since - 1, tz=UTC)
        if self.kind == "sqlite":
            since_dt = since_dt.strftime("%Y-%m-%d %H:%M:%S.%f")
        first, last = self.db.q(
            "SELECT min(started_at), max(finished_at) FROM scheduler_app_job WHERE finished_at >= %s", (since_dt,)
        )[0]
        return to_epoch(first), to_epoch(last)


class Peer(Subject):
    def env(self, **extra):
        e = dict(os.environ)
        e.update(
            PEER=self.name, BENCH_DB=self.db.env_value, DJANGO_SETTINGS_MODULE="bench.peers.settings", PYTHONPATH=ROOT
        )
        e.pop("VIRTUAL_ENV", None)
        e.update({k: str(v) for k, v in extra.items()})
        return e

    def driver(self, *args, env=None, timeout=1800):
        return run_driver([PEERS_PY, os.path.join(BENCH, "drivers", "peer.py"), *args], env or self.env(), timeout)


class DTDB(Peer):
    name = "dtdb"
    reset_sql = ("DELETE FROM django_tasks_database_dbtaskresult",)
    done_sql = "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status IN ('SUCCESSFUL', 'FAILED')"
    times_sql = "SELECT min(started_at), max(finished_at) FROM django_tasks_database_dbtaskresult"

    def workers(self, variant, tag):
        # No concurrency knob: "concurrency 4" is 4 db_worker processes.
        n = 1 if variant == "default" else 4
        return [Proc([PEERS_PY, "-m", "django", "db_worker"], self.env(), f"{tag}-{i}") for i in range(n)]

    def variant_label(self, variant):
        return "default (1 process)" if variant == "default" else "4 processes"


class Procrastinate(Peer):
    name = "procrastinate"
    reset_sql = ("TRUNCATE procrastinate_events, procrastinate_jobs CASCADE",)
    done_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('succeeded', 'failed')"
    times_sql = (
        "SELECT min(at) FILTER (WHERE type = 'started'), "
        "max(at) FILTER (WHERE type IN ('succeeded', 'failed')) FROM procrastinate_events"
    )

    def workers(self, variant, tag):
        argv = [PEERS_PY, "-m", "django", "procrastinate", "worker"]
        if variant != "default":
            argv += ["--concurrency", "4"]
        return [Proc(argv, self.env(), tag)]

    def variant_label(self, variant):
        return "default (concurrency 1)" if variant == "default" else "concurrency 4"


class DjangoQ(Peer):
    name = "djangoq"
    reset_sql = ("DELETE FROM django_q_ormq", "DELETE FROM django_q_task", "DELETE FROM django_q_schedule")
    done_sql = "SELECT count(*) FROM django_q_task"
    times_sql = "SELECT min(started), max(stopped) FROM django_q_task"

    def workers(self, variant, tag):
        extra = {} if variant == "default" else {"PEER_WORKERS": 4}
        return [Proc([PEERS_PY, "-m", "django", "qcluster"], self.env(**extra), tag)]

    def variant_label(self, variant):
        return f"default ({os.cpu_count()} workers)" if variant == "default" else "4 workers"


class PgPeer(Subject):
    """A peer that is not a Django app (bench/drivers/pgpeers.py, its jobs in bench/peers/), PostgreSQL only."""

    def env(self, **extra):
        e = dict(os.environ)
        e.update(PEER=self.name, BENCH_DSN=self.db.url, PYTHONPATH=ROOT)
        e.pop("VIRTUAL_ENV", None)
        e.pop("DJANGO_SETTINGS_MODULE", None)
        e.update({k: str(v) for k, v in extra.items()})
        return e

    def driver(self, *args, env=None, timeout=1800):
        return run_driver([PEERS_PY, os.path.join(BENCH, "drivers", "pgpeers.py"), *args], env or self.env(), timeout)

    def command(self, variant):
        raise NotImplementedError

    def workers(self, variant, tag):
        return [Proc(self.command(variant), self.env(PEER_VARIANT=variant), tag)]


class PgQueuer(PgPeer):
    name = "pgqueuer"
    reset_sql = ("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics",)
    done_sql = "SELECT count(*) FROM pgqueuer_log WHERE status IN ('successful', 'exception')"
    # 'picked' is logged by the claim statement, 'successful' when the finished batch is written.
    times_sql = (
        "SELECT min(created) FILTER (WHERE status = 'picked'), "
        "max(created) FILTER (WHERE status IN ('successful', 'exception')) FROM pgqueuer_log"
    )

    def command(self, variant):
        argv = [os.path.join(PEERS_VENV, "bin", "pgq"), "--pg-dsn", self.db.url, "run", "bench.peers.pgq_app:main"]
        if variant == "c4":
            # pgqueuer requires the cap to be at least twice the batch.
            argv += ["--max-concurrent-tasks", "4", "--batch-size", "2"]
        return argv

    def variant_label(self, variant):
        return (
            "default (`pgq run`: batch 10, no cap)"
            if variant == "default"
            else "`--max-concurrent-tasks 4 --batch-size 2`"
        )


class Oban(PgPeer):
    name = "oban"
    reset_sql = ("DELETE FROM oban_jobs",)
    done_sql = "SELECT count(*) FROM oban_jobs WHERE state IN ('completed', 'discarded')"
    times_sql = "SELECT min(attempted_at), max(completed_at) FROM oban_jobs"

    def command(self, variant):
        limit = 10 if variant == "default" else 4
        return [os.path.join(PEERS_VENV, "bin", "oban"), "start", "--dsn", self.db.url, "--queues", f"default:{limit}"]

    def variant_label(self, variant):
        return "`oban start --queues default:10` (its docs)" if variant == "default" else "`--queues default:4`"


class Chancy(PgPeer):
    name = "chancy"
    reset_sql = ("DELETE FROM chancy_jobs",)
    done_sql = "SELECT count(*) FROM chancy_jobs WHERE state IN ('succeeded', 'failed')"
    times_sql = "SELECT min(started_at), max(completed_at) FROM chancy_jobs"

    def command(self, variant):
        return [PEERS_PY, "-m", "bench.peers.chancy_app"]

    def variant_label(self, variant):
        if variant == "default":
            return "`Queue(concurrency=10)` as its guide declares it (process executor, polls every 5 s)"
        return "`Queue(concurrency=4, eager_polling=True)`"

    def stamp_n(self, ctx, variant):
        # At its documented setting a backlog drains 10 jobs per 5 s poll: a short row. With eager
        # polling it runs tens of jobs a second: a quarter of the jobs keeps the run short.
        return ctx.slow_peer_n if variant == "default" else max(1, ctx.peer_n_for(self.name) // 4)


class Dbos(PgPeer):
    name = "dbos"
    reset_sql = ("DELETE FROM dbos.workflow_status WHERE queue_name = 'bench'",)
    done_sql = "SELECT count(*) FROM dbos.workflow_status WHERE queue_name = 'bench' AND status IN ('SUCCESS', 'ERROR')"
    times_sql = (
        "SELECT to_timestamp(min(started_at_epoch_ms) / 1000.0), to_timestamp(max(updated_at) / 1000.0) "
        "FROM dbos.workflow_status WHERE queue_name = 'bench' AND status IN ('SUCCESS', 'ERROR')"
    )
    variants = ("c4",)

    def command(self, variant):
        return [PEERS_PY, "-m", "bench.peers.dbos_app"]

    def variant_label(self, variant):
        return "`worker_concurrency=4` (polls once a second)"

    def stamp_n(self, ctx, variant):
        return ctx.slow_peer_n


SUBJECT_CLASSES = {
    "ours": Ours,
    "dtdb": DTDB,
    "procrastinate": Procrastinate,
    "djangoq": DjangoQ,
    "pgqueuer": PgQueuer,
    "oban": Oban,
    "chancy": Chancy,
    "dbos": Dbos,
}


def stop_all(procs):
    for p in procs:
        p.stop()


# ---------------------------------------------------------------------------
# measurements


def throughput_once(
    subj,
    n,
    variant,
    tag,
    slots=4,
    count=1,
    timeout=None,
    stats_prefix=None,
    task=None,
    log_level="WARNING",
    env=None,
    stamp=False,
    enqueue_args=(),
    worker_args=(),
):
    """Enqueue n due no-op jobs (ours: or of ``task``; with ``stamp``: ``stamp(key, due)`` jobs, any
    subject), start the worker(s), wait for the last to finish.

    ``enqueue_args``: more arguments of the driver's ``enqueue_noop`` (ours: ``--keys``)."""
    subj.reset()  # also empties bench_stamp
    subj.driver(
        "enqueue_noop",
        "--n",
        str(n),
        *(["--task", task] if task else []),
        *(["--stamp"] if stamp else []),
        *enqueue_args,
    )
    if subj.kind == "pg":
        subj.db.q("VACUUM ANALYZE")
    spawn = time.time()
    if isinstance(subj, Ours):
        procs = subj.workers(
            variant,
            tag,
            slots=slots,
            count=count,
            stats_prefix=stats_prefix,
            log_level=log_level,
            env=env,
            args=worker_args,
        )
    else:
        procs = subj.workers(variant, tag)
    res = drain(subj, n, procs, spawn, timeout or (60 + n / 10), tag)
    if stats_prefix:
        claims = {"claims": 0, "asked": 0, "got": 0, "short": 0, "empty": 0}
        for i in range(count):
            try:
                with open(f"{stats_prefix}-{i}.json") as f:
                    for k, v in json.load(f).items():
                        claims[k] += v
            except FileNotFoundError:
                pass
        res["claims"] = claims
    return res


def cpu_seconds(subj, procs):
    """Return (CPU seconds of the worker processes, of the PostgreSQL backends serving the subject's database or None)."""
    worker = 0.0
    for p in procs:
        try:
            t = psutil.Process(p.pid).cpu_times()
            worker += t.user + t.system
        except psutil.Error:
            pass
    if subj.kind != "pg":
        return worker, None
    backends = 0.0
    own = subj.db.q("SELECT pg_backend_pid()")[0][0]
    for (pid,) in subj.db.q("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s", (subj.db.name, own)):
        try:
            t = psutil.Process(pid).cpu_times()
            backends += t.user + t.system
        except psutil.Error:
            pass
    return worker, backends


def drain(subj, n, procs, spawn, timeout, tag):
    """Wait until n jobs finished (or the timeout), stop ``procs``; return the run's rates."""
    deadline = time.monotonic() + timeout
    done = 0
    cpu_start = cpu_end = None  # (worker CPU s, database backends' CPU s, jobs done)
    try:
        while time.monotonic() < deadline:
            done = subj.done(spawn)
            if isinstance(subj, Ours):
                done = n + done
            if cpu_start is None and 0 < done < n:
                cpu_start = (*cpu_seconds(subj, procs), done)
            if done >= n:
                cpu_end = (*cpu_seconds(subj, procs), done)
                break
            if not any(p.alive() for p in procs):
                raise RuntimeError(f"{tag}: worker exited early; see {procs[0].log_path}")
            time.sleep(0.25)
    finally:
        stop_all(procs)
    first, last = subj.span(spawn)
    have = first is not None and last is not None and done > 0
    ok = done >= n and have
    # On a timeout the rate of the jobs that did finish is kept (flagged incomplete).
    res = {
        "n": n,
        "done": done,
        "complete": ok,
        "run_s": (last - first) if have else None,
        "wall_s": (last - spawn) if have else None,
    }
    res["jobs_per_s"] = min(done, n) / res["run_s"] if have and res["run_s"] > 0 else None
    res["jobs_per_s_wall"] = min(done, n) / res["wall_s"] if have and res["wall_s"] > 0 else None
    if cpu_start and cpu_end and cpu_end[2] > cpu_start[2]:
        # CPU per job between the first poll that saw jobs done and the last: what a job costs
        # the worker and the database, less sensitive than jobs/s to other load on the machine.
        jobs = cpu_end[2] - cpu_start[2]
        res["worker_cpu_ms_per_job"] = 1000 * (cpu_end[0] - cpu_start[0]) / jobs
        res["db_cpu_ms_per_job"] = 1000 * (cpu_end[1] - cpu_start[1]) / jobs if cpu_end[1] is not None else None
    return res


def floor_db(migrate):
    """A fresh <prefix>_floor database (migrated when ``migrate``: the project-table floor needs it)."""
    db = DB("pg", f"{DB_PREFIX}_floor")
    db.create()
    ours = Ours("pg")
    ours.db = db
    if migrate:
        ours.driver("setup")
    return db, ours


def drop_floor_db(db):
    db.close()
    pg_admin(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')


def m_floor(ctx):
    """The claim floor at each batch size: on a bare table with only the claim index (``bare``, the
    targets' reference) and on the project's migrated table with all its indexes (``project``)."""
    db, ours = floor_db(migrate=True)
    out = {"bare": {}, "project": {}}
    try:
        for batch in ctx.floor_batches:
            n = min(ctx.floor_n * batch, ctx.floor_cap)
            reps = {"bare": [], "project": []}
            for _ in range(ctx.reps):
                for table in reps:  # alternated: both see the same machine
                    r = run_driver(
                        [
                            OURS_PY,
                            os.path.join(BENCH, "floor.py"),
                            "--dsn",
                            PG + db.name,
                            "--batch",
                            str(batch),
                            "--n",
                            str(n),
                            "--table",
                            table,
                        ],
                        ours.env(),
                    )
                    reps[table].append(r["jobs_per_s"])
            for table, values in reps.items():
                out[table][str(batch)] = {"n": n, "jobs_per_s": summary(values), "reps": values}
            log(
                f"  floor batch {batch}: bare table {fmt_s(out['bare'][str(batch)]['jobs_per_s'])} jobs/s, "
                f"project table {fmt_s(out['project'][str(batch)]['jobs_per_s'])} jobs/s"
            )
    finally:
        drop_floor_db(db)
    return out


def m_throughput(ctx):
    out = {"ours": {}, "peers": {}}
    for kind in ctx.dbs:
        if "ours" in ctx.subjects:
            ours = ctx.subject("ours", kind)
            for n in ctx.ours_ns:
                if kind == "sqlite" and n > ctx.curve_n and not ctx.sqlite_big:
                    continue
                nreps = ctx.reps if n <= ctx.curve_n else ctx.big_reps
                reps = [throughput_once(ours, n, "default", f"tp-ours-{kind}-{n}-{r}", slots=4) for r in range(nreps)]
                out["ours"][f"{kind}/n={n}/slots=4"] = pack(reps)
                log(f"  ours {kind} n={n} slots=4: {fmt_s(out['ours'][f'{kind}/n={n}/slots=4']['jobs_per_s'])} jobs/s")
            if kind == "pg" or ctx.sqlite_curve:
                for slots in ctx.curve:
                    if slots == 4 and ctx.curve_n in ctx.ours_ns:
                        continue
                    reps = [
                        throughput_once(ours, ctx.curve_n, "default", f"tp-ours-{kind}-s{slots}-{r}", slots=slots)
                        for r in range(ctx.reps)
                    ]
                    key = f"{kind}/n={ctx.curve_n}/slots={slots}"
                    out["ours"][key] = pack(reps)
                    log(f"  ours {kind} n={ctx.curve_n} slots={slots}: {fmt_s(out['ours'][key]['jobs_per_s'])} jobs/s")
        for name in ctx.peers:
            if kind == "sqlite" and name not in SQLITE_OK:
                continue
            peer = ctx.subject(name, kind)
            variants = ("default", "c4") if kind == "pg" else ("default",)
            n = ctx.peer_n_for(name)
            for variant in variants:
                reps = [throughput_once(peer, n, variant, f"tp-{name}-{kind}-{variant}-{r}") for r in range(ctx.reps)]
                out["peers"][f"{name}/{kind}/{variant}"] = pack(reps) | {"label": peer.variant_label(variant)}
                log(
                    f"  {name} {kind} {variant}: {fmt_s(out['peers'][f'{name}/{kind}/{variant}']['jobs_per_s'])} jobs/s"
                )
    return out


def m_stamp(ctx):
    """Jobs that do a little work: N due ``stamp`` jobs (one INSERT into bench_stamp each, bench/stamps.py),
    ours with 4 slots, each peer at its default and at concurrency 4 (its own worker command), on
    PostgreSQL; N as in ``throughput``. Repetition-major, the order rotated: every repetition runs
    every configuration back to back. Ours also at 16 slots (the best of ours is a target's input);
    each peer in its ``variants`` (DBOS: concurrency 4 only), N by its ``stamp_n``."""
    variants = {}
    if "ours" in ctx.subjects:
        for slots in ctx.stamp_slots:
            variants[f"ours/pg/slots={slots}"] = {
                "subject": "ours",
                "variant": "default",
                "slots": slots,
                "n": ctx.curve_n,
                "label": f"{slots} slots",
            }
    for name in ctx.stamp_peers:
        cls = SUBJECT_CLASSES[name]
        for variant in cls.variants:
            probe = cls("pg")
            variants[f"{name}/pg/{variant}"] = {
                "subject": name,
                "variant": variant,
                "n": probe.stamp_n(ctx, variant),
                "label": probe.variant_label(variant),
            }

    def run(v, r):
        spec = variants[v]
        subj = ctx.subject(spec["subject"], "pg")
        res = throughput_once(
            subj,
            spec["n"],
            spec["variant"],
            f"stamp-{v.replace('/', '-')}-{r}",
            slots=spec.get("slots", 4),
            stamp=True,
            timeout=60 + spec["n"] / 5,
        )
        res["stamped"] = subj.db.q("SELECT count(*) FROM bench_stamp")[0][0]  # the work was done
        if spec["subject"] == "ours":
            res |= delay_stats(claim_to_start_ms(subj))  # under a backlog: every slot refilled at once
        subj.reset()  # bench_stamp holds one run's rows at most
        return res

    out = interleaved(ctx, variants, run)
    for v, o in out.items():
        o |= pack_claims(o["reps"])
        log(
            f"  stamp {v}: {fmt_s(o['jobs_per_s'])} jobs/s, stamped {min(x['stamped'] for x in o['reps'])}/{o['n']}"
            + (
                f", claim→start p50 {fmt_s(o['claim_p50'], 1)} p99 {fmt_s(o['claim_p99'], 1)} "
                f"max {fmt_s(o['claim_max'], 1)} ms"
                if "claim_p50" in o
                else ""
            )
        )
    return out


def io_once(ctx, name, tag):
    """One run of the I/O-bound scenario: ``io_n`` due jobs that ``await asyncio.sleep(0.05)``; ours on an
    async queue (``rundispatcher --queue io:200:async``), pgqueuer at its defaults. Where ours has no
    async lane (its dispatcher refuses the queue, its backend the task, or the jobs do not succeed)
    the run says so in ``unavailable`` instead of a rate."""
    subj = ctx.subject(name, "pg")
    if name != "ours":
        return throughput_once(subj, ctx.io_n, "default", tag, task="io")
    try:
        res = throughput_once(
            subj,
            ctx.io_n,
            "default",
            tag,
            task=IO_TASK,
            enqueue_args=("--queue", "io"),
            worker_args=("--queue", ctx.io_queue),
            timeout=60 + ctx.io_n / 20,
        )
    except RuntimeError as exc:
        reason = last_line(os.path.join(LOGS, f"{tag}-0.log")) or str(exc).splitlines()[0]
        return {"unavailable": reason[:300], "jobs_per_s": None, "jobs_per_s_wall": None}
    res["succeeded"] = subj.db.q("SELECT count(*) FROM scheduler_app_job WHERE status = 'succeeded'")[0][0]
    if res["succeeded"] < ctx.io_n:
        res["unavailable"] = f"{res['succeeded']} of {ctx.io_n} jobs succeeded"
        res["jobs_per_s"] = res["jobs_per_s_wall"] = None
    return res


def last_line(path):
    """The last non-blank line of a log (why a worker exited), or ''."""
    try:
        with open(path, errors="replace") as f:
            lines = [x.strip() for x in f if x.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def m_io(ctx):
    """I/O-bound async jobs: ``io_n`` due jobs of ``await asyncio.sleep(0.05)``, this project's async lane
    at 200 against pgqueuer at its defaults (PostgreSQL); alternating like ``stamp``."""
    variants = {}
    if "ours" in ctx.subjects:
        variants[f"ours/pg/{ctx.io_queue}"] = {"subject": "ours", "label": f"`rundispatcher --queue {ctx.io_queue}`"}
    if "pgqueuer" in ctx.stamp_peers:
        variants["pgqueuer/pg/default"] = {"subject": "pgqueuer", "label": PgQueuer("pg").variant_label("default")}
    if not variants:
        return {}
    out = interleaved(
        ctx,
        variants,
        lambda v, r: io_once(ctx, variants[v]["subject"], f"io-{v.replace('/', '-').replace(':', '-')}-{r}"),
    )
    for v, o in out.items():
        o["n"] = ctx.io_n
        reasons = [x["unavailable"] for x in o["reps"] if x.get("unavailable")]
        if reasons:
            o["unavailable"] = reasons[0]
        log(f"  io {v}: " + (f"not available ({reasons[0]})" if reasons else f"{fmt_s(o['jobs_per_s'])} jobs/s"))
    return out


def claim_to_start_ms(subj):
    """Return each ``stamp`` job's claim-to-start delay in ms (this project only): from the claim's time
    (its ``last_attempted_at``: the time the claim stamped, which the rate limit counts) to the task's
    first statement (its ``bench_stamp`` row). Both are the dispatcher host's clock."""
    started = {str(k): s for k, s in subj.db.q("SELECT key, started FROM bench_stamp")}
    delays = []
    rows = subj.db.q(
        "SELECT args, kwargs, last_attempted_at FROM scheduler_app_job "
        "WHERE task = 'bench.benchapp.tasks.stamp' AND last_attempted_at IS NOT NULL"
    )
    for args, kwargs, claimed in rows:
        args, kwargs = (json.loads(x) if isinstance(x, str) else x for x in (args, kwargs))
        key = str(kwargs.get("key", args[0] if args else ""))
        if key in started:
            delays.append((started[key] - to_epoch(claimed)) * 1000)
    return delays


def delay_stats(delays):
    """p50, p99 and max of one run's claim-to-start delays (ms), and how many there were."""
    return {
        "claim_p50": pct(delays, 50),
        "claim_p99": pct(delays, 99),
        "claim_max": max(delays) if delays else None,
        "claim_n": len(delays),
    }


CLAIM_KEYS = ("claim_p50", "claim_p99", "claim_max")


def pack_claims(reps):
    """Summaries (median, min-max of repetitions) of the runs' claim-to-start p50, p99 and max; {} for peers."""
    if not any(k in r for r in reps for k in CLAIM_KEYS):
        return {}
    return {k: summary([r.get(k) for r in reps]) for k in CLAIM_KEYS}


def pack(reps):
    return {
        "jobs_per_s": summary([r["jobs_per_s"] for r in reps]),
        "jobs_per_s_wall": summary([r["jobs_per_s_wall"] for r in reps]),
        "complete": all(r.get("complete", False) for r in reps),
        "reps": reps,
    }


def timed_session(subj, tag, body, warmup):
    procs = subj.workers("default", tag)
    try:
        time.sleep(warmup)
        return body()
    finally:
        stop_all(procs)


def precision_rep(ctx, subj, tag, busy=0):
    """One precision run: prec_n stamp jobs spread over prec_spread s, the first due 3 s ahead, the
    worker already running; with ``busy``, that many slots hold sleeping jobs the whole time."""
    subj.reset()
    info = {}

    def body():
        args = ["enqueue_stamps", "--n", str(ctx.prec_n), "--first", "3", "--spread", str(ctx.prec_spread)]
        if busy:
            args += ["--busy", str(busy)]
        info.update(subj.driver(*args))
        end = info["base"] + 3 + ctx.prec_spread + ctx.prec_wait
        while time.time() < end:
            if subj.db.q("SELECT count(*) FROM bench_stamp")[0][0] >= ctx.prec_n:
                break
            time.sleep(0.5)
        return subj.db.q("SELECT due, started FROM bench_stamp WHERE key LIKE 't%%'")

    rows = timed_session(subj, tag, body, ctx.warmup)
    late = [(s - d) * 1000 for d, s in rows]
    rep = {
        "ran": len(late),
        "expected": ctx.prec_n,
        "p50": pct(late, 50),
        "p95": pct(late, 95),
        "p99": pct(late, 99),
        "max": max(late) if late else None,
        "min": min(late) if late else None,
    }
    if isinstance(subj, Ours):
        rep |= delay_stats(claim_to_start_ms(subj))
    if busy:
        rep["busy_running"] = info.get("busy_running")
    return rep


def pack_precision(ctx, reps):
    return (
        {k: summary([x[k] for x in reps]) for k in ("p50", "p95", "p99", "max", "min")}
        | pack_claims(reps)
        | {"ran": [x["ran"] for x in reps], "expected": ctx.prec_n, "reps": reps}
    )


def m_precision(ctx):
    out = {}
    for kind in ctx.dbs:
        for name in ctx.subjects:
            if (kind == "sqlite" and name != "ours") or name in NEW_PEERS:
                continue
            subj = ctx.subject(name, kind)
            reps = [
                precision_rep(ctx, subj, f"prec-{name}-{kind}-{r}")
                for r in range(ctx.reps if name == "ours" else ctx.peer_timing_reps)
            ]
            out[f"{name}/{kind}"] = pack_precision(ctx, reps)
            o = out[f"{name}/{kind}"]
            log(
                f"  precision {name} {kind}: p50 {fmt_s(o['p50'], 1)} p99 {fmt_s(o['p99'], 1)} "
                f"max {fmt_s(o['max'], 1)} ms"
                + (
                    f"; claim→start p50 {fmt_s(o['claim_p50'], 1)} "
                    f"p99 {fmt_s(o['claim_p99'], 1)} max {fmt_s(o['claim_max'], 1)} ms"
                    if "claim_p50" in o
                    else ""
                )
            )
    return out


def m_precision_busy(ctx):
    """Precision with 4 slots of which ``busy_slots`` run sleeping jobs the whole time (ours, PostgreSQL)."""
    subj = ctx.subject("ours", "pg")
    reps = [precision_rep(ctx, subj, f"precbusy-ours-pg-{r}", busy=ctx.busy_slots) for r in range(ctx.reps)]
    o = pack_precision(ctx, reps) | {
        "busy": ctx.busy_slots,
        "slots": 4,
        "busy_running": [x.get("busy_running") for x in reps],
    }
    log(
        f"  precision ours pg, {ctx.busy_slots} of 4 slots busy (running: {o['busy_running']}): "
        f"p50 {fmt_s(o['p50'], 1)} p99 {fmt_s(o['p99'], 1)} max {fmt_s(o['max'], 1)} ms; "
        f"claim→start p50 {fmt_s(o['claim_p50'], 1)} p99 {fmt_s(o['claim_p99'], 1)} max {fmt_s(o['claim_max'], 1)} ms"
    )
    return {"ours/pg": o}


def interleaved(ctx, variants, run):
    """Run every variant once per repetition, in a rotated order; return {variant: pack(reps)}."""
    names = list(variants)
    reps = {v: [] for v in names}
    for r in range(ctx.reps):
        k = r % len(names)
        for v in names[k:] + names[:k]:
            reps[v].append(run(v, r))
    return {v: pack(reps[v]) | variants[v] for v in names}


def m_logging(ctx):
    """4 slots, no-op jobs: the dispatcher at the settings' default log level (SCHEDULER_LOG_LEVEL
    unset) and at WARNING (what every other throughput run uses), in the same run."""
    subj = ctx.subject("ours", "pg")
    variants = {"default": {"log_level": None}, "warning": {"log_level": "WARNING"}}
    out = interleaved(
        ctx,
        variants,
        lambda v, r: throughput_once(
            subj, ctx.log_n, "default", f"log-{v}-{r}", slots=4, log_level=variants[v]["log_level"]
        ),
    )
    for v, o in out.items():
        log(f"  logging {v}: {fmt_s(o['jobs_per_s'])} jobs/s")
    return out


def m_joblog(ctx):
    """4 slots: a task that logs one INFO line (log_one) against a no-op from the same module, at the
    default log level and at WARNING; and, at the default level, log capture off (log_one) and the
    rollups off (noop): what each costs."""
    subj = ctx.subject("ours", "pg")
    variants = {
        f"{task}/{level}": {"task": path, "log_level": None if level == "default" else "WARNING"}
        for level in ("default", "warning")
        for task, path in (("noop", BENCH_NOOP), ("log_one", LOG_ONE))
    }
    variants["log_one/no-capture"] = {"task": LOG_ONE, "log_level": None, "env": {"BENCH_JOB_LOG_MAX_RECORDS": "0"}}
    variants["noop/no-rollups"] = {"task": BENCH_NOOP, "log_level": None, "env": {"BENCH_ROLLUP_INTERVAL": "0"}}
    out = interleaved(
        ctx,
        variants,
        lambda v, r: throughput_once(
            subj,
            ctx.log_n,
            "default",
            f"joblog-{v.replace('/', '-')}-{r}",
            slots=4,
            task=variants[v]["task"],
            log_level=variants[v]["log_level"],
            env=variants[v].get("env"),
        ),
    )
    for v, o in out.items():
        log(f"  joblog {v}: {fmt_s(o['jobs_per_s'])} jobs/s")
    return out


def processes_once(subj, n, processes, slots, tag, timeout):
    """``rundispatcher --processes P --concurrency S``: start it, wait until all P dispatchers are
    registered, then enqueue n due no-op jobs in one transaction and wait for the last to finish
    (so every process is up when the work arrives; start-up is not in the rate)."""
    subj.reset()
    argv = [
        OURS_PY,
        os.path.join(ROOT, "manage.py"),
        "rundispatcher",
        "--processes",
        str(processes),
        "--concurrency",
        str(slots),
    ]
    spawn = time.time()
    proc = Proc(argv, subj.env(), tag)
    try:
        deadline = time.monotonic() + 60
        while True:
            up = subj.db.q("SELECT count(*) FROM scheduler_app_worker WHERE state = 'alive'")[0][0]
            if up >= processes:
                break
            if not proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{tag}: {up} of {processes} dispatchers registered; see {proc.log_path}")
            time.sleep(0.1)
        ready = time.time() - spawn
        start = time.time()
        subj.driver("enqueue_noop", "--n", str(n))
    except BaseException:
        proc.stop()
        raise
    res = drain(subj, n, [proc], start, timeout, tag)
    res["ready_s"] = ready
    return res


def m_processes(ctx):
    """rundispatcher --processes 1, 2, 4 with --concurrency 4 and 16 (PostgreSQL, no-op jobs)."""
    subj = ctx.subject("ours", "pg")
    variants = {
        f"{count}/{slots}": {"processes": count, "slots": slots}
        for slots in ctx.proc_slots
        for count in ctx.proc_counts
    }
    out = interleaved(
        ctx,
        variants,
        lambda v, r: processes_once(
            subj,
            ctx.proc_n,
            variants[v]["processes"],
            variants[v]["slots"],
            f"procs-{v.replace('/', 'x')}-{r}",
            timeout=60 + ctx.proc_n / 50,
        ),
    )
    for o in out.values():
        o["ready_s"] = summary([x["ready_s"] for x in o["reps"]])
        log(
            f"  {o['processes']} process(es) x {o['slots']} slots: {fmt_s(o['jobs_per_s'])} jobs/s "
            f"(all registered {fmt_s(o['ready_s'], 1)} s after spawn)"
        )
    return out


class ApiServer:
    def __init__(self, subj):
        import socket

        self.subj = subj
        with socket.socket() as sock:  # a free port (not a fixed one another checkout may hold)
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"127.0.0.1:{self.port}"
        # Django's threaded dev server (what runserver --noreload runs); see wsgi_server.py.
        argv = [OURS_PY, os.path.join(BENCH, "wsgi_server.py"), str(self.port)]
        self.proc = Proc(argv, subj.env(), f"api-{subj.kind}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self.proc.alive():
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        self.proc.stop()
        raise RuntimeError("API server did not start; see " + self.proc.log_path)

    def stop(self):
        self.proc.stop()


def m_pickup(ctx):
    out = {}
    for kind in ctx.dbs:
        for name in ctx.subjects:
            if (kind == "sqlite" and name != "ours") or name in NEW_PEERS:
                continue
            subj = ctx.subject(name, kind)
            vias = ["orm", "api", "inproc"] if name == "ours" else ["enqueue"]
            server = ApiServer(subj) if name == "ours" else None
            try:
                for via in vias:
                    reps = []
                    for r in range(ctx.pickup_reps):
                        subj.reset()
                        args = ["pickup", "--n", str(ctx.pickup_n)]
                        if name == "ours":
                            args += ["--via", via, "--url", server.url, "--token", ctx.tokens[kind]]
                        res = timed_session(
                            subj,
                            f"pick-{name}-{kind}-{via}-{r}",
                            lambda subj=subj, args=args: subj.driver(*args),
                            ctx.warmup,
                        )
                        lat, after = res["latency_ms"], res.get("after_return_ms") or []
                        reps.append(
                            {
                                "p50": pct(lat, 50),
                                "p99": pct(lat, 99),
                                "max": pct(lat, 100),
                                "missing": sum(1 for x in lat if x is None),
                                "after_p50": pct(after, 50) if after else None,
                                "after_p99": pct(after, 99) if after else None,
                            }
                        )
                    key = f"{name}/{kind}/{via}"
                    out[key] = {k: summary([x[k] for x in reps]) for k in ("p50", "p99", "max")} | {"reps": reps}
                    if all(x["after_p50"] is not None for x in reps):
                        out[key] |= {k: summary([x[k] for x in reps]) for k in ("after_p50", "after_p99")}
                    log(f"  pickup {key}: p50 {fmt_s(out[key]['p50'], 1)} p99 {fmt_s(out[key]['p99'], 1)} ms")
            finally:
                if server:
                    server.stop()
    return out


def rss_mb(pid):
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.NoSuchProcess:
        return None


def seed_ours(db, n, *, status="pending", due_offset="-1", step=0.0, finished=False):
    """Insert n rows into our table with SQL (fast): execute_at = now + offset + i * step seconds."""
    if db.kind == "pg":
        fin = "now() - interval '1 hour'" if finished else "NULL"
        sql = (
            "INSERT INTO scheduler_app_job (task, args, kwargs, queue, priority, execute_at, status, attempts, "
            "max_attempts, errors, cancel_requested, worker, created_at, updated_at, started_at, finished_at) "
            f"SELECT 'scheduler_app.demo.tasks.noop', '[]', '{{}}', 'default', 0, "
            f"now() + make_interval(secs => {due_offset} + i * {step}), '{status}', {1 if finished else 0}, 3, "
            f"'[]', false, '', now(), {'now() - interval ' + repr('1 hour') if finished else 'now()'}, "
            f"{fin}, {fin} FROM generate_series(1, {int(n)}) AS i"
        )
        db.q(sql)
    else:
        fin = "strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 hour')" if finished else "NULL"
        upd = fin if finished else "strftime('%Y-%m-%d %H:%M:%f', 'now')"
        sql = (
            f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {int(n)}) "
            "INSERT INTO scheduler_app_job (task, args, kwargs, queue, priority, execute_at, status, attempts, "
            "max_attempts, errors, cancel_requested, worker, created_at, updated_at, started_at, finished_at) "
            "SELECT 'scheduler_app.demo.tasks.noop', '[]', '{}', 'default', 0, "
            f"strftime('%Y-%m-%d %H:%M:%f', 'now', printf('%+.3f seconds', {due_offset} + i * {step})), "
            f"'{status}', {1 if finished else 0}, 3, '[]', 0, '', strftime('%Y-%m-%d %H:%M:%f', 'now'), "
            f"{upd}, {fin}, {fin} FROM s"
        )
        db.q(sql)
    db.q("VACUUM ANALYZE" if db.kind == "pg" else "ANALYZE")


def sample_rss(procs, seconds, until=None, every=0.25):
    peak, last = 0.0, None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = sum(filter(None, (rss_mb(p.pid) for p in procs)))
        if v:
            peak, last = max(peak, v), v
        if until and until():
            break
        time.sleep(every)
    return peak, last


def m_memory(ctx):
    out = {}
    for kind in ctx.dbs:
        subj = ctx.subject("ours", kind)
        res = {}
        # idle
        subj.reset()
        procs = subj.workers("default", f"mem-{kind}-idle")
        try:
            time.sleep(ctx.warmup + 2)
            res["idle_mb"], _ = sample_rss(procs, 3)
        finally:
            stop_all(procs)
        # 1M future pending jobs (spaced 5 ms from now + 240 s, so the window
        # of the default 300 s horizon is full up to the heap cap)
        subj.reset()
        t = time.time()
        seed_ours(subj.db, ctx.mem_future, due_offset="240", step=0.005)
        res["seed_future_s"] = time.time() - t
        procs = subj.workers("default", f"mem-{kind}-future")
        try:
            time.sleep(ctx.warmup + 2)
            res["future_mb"], _ = sample_rss(procs, 5)
        finally:
            stop_all(procs)
        # 100k due jobs, 4 slots, sampled while they run
        subj.reset()
        seed_ours(subj.db, ctx.mem_due)
        procs = subj.workers("default", f"mem-{kind}-due")
        try:
            time.sleep(1)
            remaining = lambda subj=subj: subj.db.q(Ours.remaining_sql)[0][0] == 0  # noqa: E731
            res["due_mb"], res["due_last_mb"] = sample_rss(procs, ctx.mem_due_seconds, until=remaining, every=0.5)
            res["due_remaining"] = subj.db.q(Ours.remaining_sql)[0][0]
        finally:
            stop_all(procs)
        subj.reset()
        res["future_growth_mb"] = res["future_mb"] - res["idle_mb"]
        res["due_growth_mb"] = res["due_mb"] - res["idle_mb"]
        out[kind] = res
        log(
            f"  memory {kind}: idle {res['idle_mb']:.1f} MB, +{res['future_growth_mb']:.1f} MB with "
            f"{ctx.mem_future:,} future, +{res['due_growth_mb']:.1f} MB with {ctx.mem_due:,} due"
        )
    return out


def m_scale(ctx):
    out = {}
    kind = "pg"
    subj = ctx.subject("ours", kind)
    subj.reset()
    have = 0
    for size in ctx.scale_sizes:
        subj.db.q("DELETE FROM scheduler_app_job WHERE status IN ('pending', 'running')")
        seed_ours(subj.db, size - have, status="succeeded", finished=True)
        have = size
        seed_ours(subj.db, 1000)  # due pending rows for the claim to lock (rolled back)
        ex = subj.driver("explain", "--repeat", "30")
        subj.db.q("DELETE FROM scheduler_app_job WHERE status IN ('pending', 'running')")
        reps = [throughput_once(subj, ctx.scale_n, "default", f"scale-{size}-{r}") for r in range(ctx.reps)]
        out[str(size)] = {
            "queries": {k: {"plan": v["plan"], "ms": summary(v["ms"]), "p99": pct(v["ms"], 99)} for k, v in ex.items()},
            "throughput": pack(reps),
        }
        log(
            f"  scale {size:,} finished rows: "
            + ", ".join(f"{k} {out[str(size)]['queries'][k]['ms']['median']:.2f} ms" for k in ex)
            + f"; {fmt_s(out[str(size)]['throughput']['jobs_per_s'])} jobs/s"
        )
    subj.db.q("DELETE FROM scheduler_app_job")
    return out


def m_enqueue(ctx):
    """Enqueue rates. Repetition-major: each repetition runs every subject and (PostgreSQL) the floor
    back to back, so drift in the machine's commit latency hits them alike."""
    out = {}
    for kind in ctx.dbs:
        names = [n for n in ctx.subjects if (kind == "pg" or n in SQLITE_OK) and n not in NEW_PEERS]
        subjects = {n: ctx.subject(n, kind) for n in names}
        reps = {n: [] for n in names}
        server = ApiServer(subjects["ours"]) if "ours" in subjects else None
        floor = floor_db(migrate=False) if kind == "pg" else None
        try:
            for _ in range(ctx.reps):
                for name, subj in subjects.items():
                    subj.reset()
                    args = [
                        "enqueue_rate",
                        "--n",
                        str(ctx.enqueue_n),
                        "--warmup",
                        str(ctx.enqueue_warmup),
                        "--many-batch",
                        str(ctx.enqueue_many_batch),
                        "--many-calls",
                        str(ctx.enqueue_many_calls),
                    ]
                    if name == "ours":
                        args += [
                            "--url",
                            server.url,
                            "--token",
                            ctx.tokens[kind],
                            "--single",
                            str(ctx.api_single),
                            "--bulk-requests",
                            str(ctx.api_bulk),
                        ]
                    reps[name].append(subj.driver(*args))
                if floor:
                    # The floor of the same single-row INSERT + NOTIFY (raw psycopg, a bare table).
                    db, env_of = floor
                    reps.setdefault("floor", []).append(
                        run_driver(
                            [
                                OURS_PY,
                                os.path.join(BENCH, "floor.py"),
                                "--dsn",
                                PG + db.name,
                                "--mode",
                                "enqueue",
                                "--n",
                                str(ctx.enqueue_n),
                            ],
                            env_of.env(),
                        )
                    )
        finally:
            if server:
                server.stop()
            if floor:
                drop_floor_db(floor[0])
        for subj in subjects.values():
            subj.reset()
        for name, rs in reps.items():
            res = {
                "enqueue_per_s": summary([x["enqueue_per_s"] for x in rs]),
                "in_tx_per_s": summary([x["in_tx_per_s"] for x in rs]),
            }
            if name == "ours":
                res["enqueue_many_per_s"] = summary([x["enqueue_many_per_s"] for x in rs])
                res["enqueue_many_one_call_per_s"] = summary([x["enqueue_many_one_call_per_s"] for x in rs])
                res["api_bulk_per_s"] = summary([x["api_bulk_per_s"] for x in rs])
                res["api_single_p50_ms"] = summary([pct(x["api_single_ms"], 50) for x in rs])
                res["api_single_p99_ms"] = summary([pct(x["api_single_ms"], 99) for x in rs])
            elif "bulk_per_s" in rs[0]:  # a peer's bulk call (procrastinate's batch_defer)
                res["bulk_per_s"] = summary([x["bulk_per_s"] for x in rs])
            out[f"{name}/{kind}"] = res
            log(f"  enqueue {name} {kind}: " + ", ".join(f"{k} {fmt_s(v, 1)}" for k, v in res.items()))
    return out


def m_scaling(ctx):
    out = {}
    subj = ctx.subject("ours", "pg")
    for count in ctx.scaling_counts:
        reps = []
        for r in range(ctx.reps):
            prefix = os.path.join(RESULTS, f"claims-{count}-{r}")
            reps.append(
                throughput_once(
                    subj,
                    ctx.scaling_n,
                    "default",
                    f"scaling-{count}-{r}",
                    slots=4,
                    count=count,
                    stats_prefix=prefix,
                    timeout=300,
                )
            )
        claims = [x["claims"] for x in reps]
        out[str(count)] = pack(reps) | {
            "claims": summary([c["claims"] for c in claims]),
            "short": summary([c["short"] for c in claims]),
            "empty": summary([c["empty"] for c in claims]),
            "short_pct": summary([100 * c["short"] / c["claims"] if c["claims"] else None for c in claims]),
            "rows_per_claim": summary([c["got"] / c["claims"] if c["claims"] else None for c in claims]),
        }
        o = out[str(count)]
        log(
            f"  {count} dispatchers: {fmt_s(o['jobs_per_s'])} jobs/s, {fmt_s(o['claims'])} claims, "
            f"{fmt_s(o['short_pct'], 1)}% short, {fmt_s(o['rows_per_claim'], 2)} rows/claim"
        )
    return out


def m_limits(ctx):
    import flow_bench  # bench/flow_bench.py

    return flow_bench.measure(
        ctx, throughput_once=throughput_once, pack=pack, summary=summary, pct=pct, fmt_s=fmt_s, log=log
    )


def m_workflows(ctx):
    import workflows_bench  # bench/workflows_bench.py, run as a subprocess on this checkout's own database

    name = f"{DB_PREFIX}_workflows"
    fresh_pg(name)
    try:
        return workflows_bench.measure(ctx, python=OURS_PY, database_url=PG + name, summary=summary, log=log)
    finally:
        pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def m_keys(ctx):
    import keys_bench  # bench/keys_bench.py: makes and drops a test database named after this one (+ its pid)

    return keys_bench.measure(ctx, python=OURS_PY, database_url=PG + f"{DB_PREFIX}_keys", log=log)


# ---------------------------------------------------------------------------
# context, report


class Ctx:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.reps = args.reps or (1 if args.quick else 3)
        only = args.only.split(",") if args.only else ALL_MEASUREMENTS
        self.only = [m for name in only for m in MEASUREMENT_GROUPS.get(name, [name])]
        if args.subjects:
            subjects = args.subjects.split(",")
        elif "peers-new" in only:
            subjects = ["ours", "peers-new"]
        else:
            subjects = ALL_SUBJECTS + NEW_PEERS
        self.subjects = list(dict.fromkeys(s for name in subjects for s in SUBJECT_GROUPS.get(name, [name])))
        unknown = [s for s in self.subjects if s not in SUBJECT_CLASSES] + [
            m for m in self.only if m not in ALL_MEASUREMENTS
        ]
        if unknown:
            raise SystemExit(f"unknown subject or measurement: {', '.join(unknown)}")
        # The Django peers (every measurement) and every peer (stamp, io).
        self.peers = [s for s in self.subjects if s != "ours" and s not in NEW_PEERS]
        self.stamp_peers = [s for s in self.subjects if s != "ours"]
        self.dbs = args.dbs.split(",")
        q = args.quick
        self.ours_ns = [int(x) for x in args.ours_n.split(",")] if args.ours_n else [500] if q else [5000, 50000]
        self.curve = [int(x) for x in args.curve.split(",")] if args.curve else [1, 4, 16, 64]
        self.curve_n = 500 if q else 5000
        self.claim_n = 200 if q else 1000
        self.claim_repeat = 50 if q else 300  # limits, keys
        self.workflow_n = 500 if q else 10_000
        self.sqlite_curve = not q
        self.peer_n = 200 if q else args.peer_n
        # The peers that drain a backlog a few jobs a second (chancy at its documented setting, DBOS).
        self.slow_peer_n = 12 if q else args.slow_peer_n
        self.stamp_slots = [4, 16]  # ours in ``stamp``
        self.io_n = 500 if q else 5000
        self.io_queue = args.io_queue
        # django-q2 runs ~35 jobs/s here: half the jobs keeps a full run under an hour.
        self.peer_n_overrides = {} if q else {"djangoq": max(1, args.peer_n // 2)}
        self.big_reps = 1 if q else args.big_reps
        self.sqlite_big = args.sqlite_big
        self.peer_timing_reps = 1 if q else args.peer_timing_reps
        self.pickup_reps = 1
        self.floor_batches = [1, 4, 16, 64]
        self.floor_n = 200 if q else 2000
        self.floor_cap = 2000 if q else 20000
        self.prec_n = 50 if q else 200
        self.prec_spread = 5.0 if q else 10.0
        self.prec_wait = 30.0
        self.pickup_n = 10 if q else 50
        self.warmup = 3.0
        self.mem_future = 20_000 if q else 1_000_000
        self.mem_due = 5_000 if q else 100_000
        self.mem_due_seconds = 10 if q else 30
        self.scale_sizes = [1_000, 10_000] if q else [10_000, 100_000, 1_000_000]
        self.scale_n = 500 if q else 2000
        self.enqueue_n = 200 if q else 1000
        self.enqueue_warmup = 20
        self.enqueue_many_batch = 1000  # items per enqueue_many() call (the bulk API's per-request 1,000)
        self.enqueue_many_calls = 2 if q else 10
        self.log_n = 500 if q else 10000  # logging, joblog: jobs per run, 4 slots
        self.busy_slots = 2  # precision_busy: of 4 slots
        self.proc_counts = [1, 2, 4]
        self.proc_slots = [4, 16]
        self.proc_n = 1000 if q else 10000
        self.api_single = 20 if q else 200
        self.api_bulk = 2 if q else 10
        self.scaling_counts = [1, 2] if q else [1, 2, 4, 8]
        self.scaling_n = 1000 if q else 10000
        self._subjects = {}
        self.tokens = {}

    def peer_n_for(self, name):
        return self.peer_n_overrides.get(name, self.peer_n)

    def subject(self, name, kind):
        key = (name, kind)
        if key not in self._subjects:
            s = SUBJECT_CLASSES[name](kind)
            log(f"setting up {name} on {kind} ...")
            info = s.setup()
            if name == "ours":
                self.tokens[kind] = info["token"]
            self._subjects[key] = s
        return self._subjects[key]

    def close(self):
        for s in self._subjects.values():
            s.db.close()


def machine():
    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001 - a figure of the machine left blank
            return ""

    lscpu = sh("lscpu")
    pick = [
        line
        for line in lscpu.splitlines()
        if line.split(":")[0]
        in ("Architecture", "CPU(s)", "Model name", "Thread(s) per core", "Hypervisor vendor", "L3 cache")
    ]
    with psycopg.connect(PG + "postgres") as c:
        pgv = c.execute("SHOW server_version").fetchone()[0]
        settings = {
            k: c.execute(f"SHOW {k}").fetchone()[0]
            for k in ("shared_buffers", "synchronous_commit", "fsync", "max_connections")
        }
    peers_py = sh(f"{PEERS_PY} --version") if os.path.exists(PEERS_PY) else "(peers venv missing)"
    dirty = sh(f"git -C {ROOT} status --porcelain -- scheduler_app project")
    return {
        "git": sh(f"git -C {ROOT} rev-parse --short HEAD")
        + (" + uncommitted changes in scheduler_app/project" if dirty else ""),
        "nproc": os.cpu_count(),
        "lscpu": pick,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "postgresql": pgv,
        "pg_settings": settings,
        "python": sys.version.split()[0],
        "peers_python": peers_py,
        "sqlite": sqlite3.sqlite_version,
        "loadavg_start": os.getloadavg(),
    }


def ensure_peers_venv(needed):
    """Create bench/.venv-peers when missing, and install requirements-peers.txt into it whenever the
    file differs from what was last installed there (a venv made before a peer was added gets it)."""
    if not needed:
        return
    requirements = os.path.join(BENCH, "requirements-peers.txt")
    marker = os.path.join(PEERS_VENV, "installed-requirements.txt")
    with open(requirements) as f:
        wanted = f.read()
    if os.path.exists(PEERS_PY) and os.path.exists(marker):
        with open(marker) as f:
            if f.read() == wanted:
                return
    if not os.path.exists(PEERS_PY):
        py = subprocess.run(
            [os.path.join(ROOT, "scripts", "find-python")], capture_output=True, text=True, check=True
        ).stdout.strip()
        log(f"creating {PEERS_VENV} with {py}")
        subprocess.run([py, "-m", "venv", PEERS_VENV], check=True)
    log(f"installing {requirements} into {PEERS_VENV}")
    subprocess.run(
        [PEERS_PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", requirements], check=True
    )
    with open(marker, "w") as f:
        f.write(wanted)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small N, 1 repetition (harness check)")
    p.add_argument(
        "--only",
        default="",
        help=f"comma list of {','.join(ALL_MEASUREMENTS)}; peers-new = stamp,io (ours + new peers)",
    )
    p.add_argument(
        "--subjects",
        default="",
        help=f"comma list of {','.join(ALL_SUBJECTS + NEW_PEERS)}; peers-new = {','.join(NEW_PEERS)}",
    )
    p.add_argument("--dbs", default="pg,sqlite", help="pg,sqlite")
    p.add_argument("--reps", type=int, default=0, help="repetitions (default 3; 1 with --quick)")
    p.add_argument("--peer-n", type=int, default=2000, help="jobs per peer throughput run")
    p.add_argument("--slow-peer-n", type=int, default=40, help="jobs per stamp run of chancy's default and DBOS")
    p.add_argument("--io-queue", default=IO_QUEUE, help=f"rundispatcher --queue of the io measurement ({IO_QUEUE})")
    p.add_argument("--big-reps", type=int, default=1, help="repetitions of the 50,000-job run")
    p.add_argument("--sqlite-big", action="store_true", help="also run 50,000 jobs on SQLite")
    p.add_argument("--ours-n", default="", help="this project's throughput runs: comma list of N (default 5000,50000)")
    p.add_argument("--curve", default="", help="slots of the throughput curve: comma list (default 1,4,16,64)")
    p.add_argument("--peer-timing-reps", type=int, default=1, help="repetitions of peers' precision runs")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/BENCHMARKS.md / SCALING.md")
    p.add_argument("--from-json", default="", help="render the docs from a saved results file")
    args = p.parse_args()
    command = (
        "make bench  # = .venv/bin/python bench/run.py"
        if len(sys.argv) == 1
        else ".venv/bin/python bench/run.py " + shlex.join(sys.argv[1:])
    )

    os.makedirs(RESULTS, exist_ok=True)
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
    else:
        ctx = Ctx(args)
        ensure_peers_venv(bool(ctx.stamp_peers))
        results = {
            "command": command,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "config": {k: v for k, v in vars(ctx).items() if not k.startswith("_") and k not in ("args", "tokens")},
            "results": {},
        }
        t_all = time.time()
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        out_path = os.path.join(RESULTS, f"{stamp}.json")
        try:
            for m in ALL_MEASUREMENTS:
                if m not in ctx.only:
                    continue
                if m in OURS_ONLY and "ours" not in ctx.subjects:
                    continue
                if m in PG_ONLY and "pg" not in ctx.dbs:
                    continue
                log(f"== {m}")
                t = time.time()
                results["results"][m] = globals()["m_" + m](ctx)
                results.setdefault("durations", {})[m] = time.time() - t
                with open(out_path, "w") as f:
                    json.dump(results, f, indent=1, default=str)
        finally:
            ctx.close()
        results["total_s"] = time.time() - t_all
        results["machine"]["loadavg_end"] = os.getloadavg()
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1, default=str)
        log(f"results: {out_path}")
    import report  # bench/report.py

    text = report.render(results)
    print(text)
    if not args.no_docs:
        report.write_docs(results, text)


if __name__ == "__main__":
    sys.path.insert(0, BENCH)
    main()
