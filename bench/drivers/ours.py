"""Driver for this project (runs in .venv with bench.settings_ours).

Subcommands print one ``RESULT {json}`` line. See bench/run.py.
"""

import argparse
import http.client
import json
import os
import random
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.drivers.common import create_stamp_table, emit, setup_django, wait_stamp

NOOP = "scheduler_app.demo.tasks.noop"
STAMP = "bench.benchapp.tasks.stamp"
SLEEP = "bench.benchapp.tasks.sleep_until"


def dt(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def cmd_setup(args):
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    create_stamp_table()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    User = get_user_model()
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_staff": True, "is_superuser": True})
    user.is_staff = user.is_superuser = True
    user.save()
    token, _ = Token.objects.get_or_create(user=user)
    emit({"token": token.key})


def cmd_enqueue_noop(args):
    """Enqueue ``--n`` due jobs of ``--task`` (with ``--stamp``: ``stamp(key, due)`` jobs, one INSERT each)."""
    from scheduler_app import lifecycle

    t0 = time.perf_counter()
    at = None if args.future is None else dt(time.time() + args.future)
    base = (
        {"task": STAMP if args.stamp else args.task}
        | ({} if at is None else {"execute_at": at})
        | ({} if args.queue is None else {"queue": args.queue})
    )
    due = time.time()
    done = 0
    while done < args.n:
        chunk = min(args.n - done, 10_000)
        if args.stamp:
            specs = [base | {"kwargs": {"key": f"s{i}", "due": due}} for i in range(done, done + chunk)]
        elif args.keys is not None:
            # ``--keys 0``: every job its own key; ``--keys K``: K keys in turn. Limit ``--key-limit``.
            specs = [
                base
                | {"concurrency_key": f"k{i if args.keys == 0 else i % args.keys}", "concurrency_limit": args.key_limit}
                for i in range(done, done + chunk)
            ]
        else:
            specs = [base] * chunk
        lifecycle.enqueue_many(specs, max_size=None)
        done += chunk
    emit({"seconds": time.perf_counter() - t0})


def cmd_enqueue_stamps(args):
    from bench.benchapp.tasks import sleep_until, stamp

    base = time.time()
    busy = 0
    if args.busy:
        # Hold ``--busy`` slots with sleeping jobs until ``--busy-tail`` s after
        # the last stamp is due; go on once the dispatcher runs them all.
        from scheduler_app.models import Job

        until = base + args.first + args.spread + args.busy_tail
        for _ in range(args.busy):
            sleep_until.enqueue(until=until)
        deadline = time.monotonic() + min(args.first - 0.5, 5.0)
        while time.monotonic() < deadline:
            busy = Job.objects.filter(task=SLEEP, status="running").count()
            if busy >= args.busy:
                break
            time.sleep(0.01)
    for i in range(args.n):
        due = base + args.first + i * args.spread / args.n
        stamp.using(run_after=dt(due)).enqueue(key=f"t{i}", due=due)
    emit({"base": base, "enqueued_in": time.time() - base, "busy_running": busy})


class Api:
    def __init__(self, url, token):
        host, port = url.split(":")
        self.addr = (host, int(port))
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.conn = None

    def post(self, path, body):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(*self.addr, timeout=60)
            try:
                self.conn.request("POST", path, json.dumps(body), self.headers)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.status >= 300:
                    raise RuntimeError(f"POST {path}: {resp.status} {data[:300]!r}")
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return json.loads(data or b"null")
            except (http.client.HTTPException, ConnectionError, OSError):
                self.conn = None
                if attempt:
                    raise


def cmd_pickup(args):
    from bench.benchapp.tasks import relay, stamp

    api = Api(args.url, args.token) if args.via == "api" else None
    lat, after_return = [], []
    for i in range(args.n + args.warmup):
        time.sleep(random.uniform(0.05, 0.15))  # the dispatcher is idle again
        key = f"p{args.via}{i}"
        t0 = time.time()
        if api:
            api.post("/api/jobs/", {"task": STAMP, "kwargs": {"key": key, "due": t0}})
        elif args.via == "inproc":
            relay.enqueue(key=key)  # the job enqueues stamp(due=its own now)
        else:
            stamp.enqueue(key=key, due=t0)
        t1 = time.time()  # the enqueue committed and returned
        started = wait_stamp(key)
        if i >= args.warmup and args.via != "inproc":
            after_return.append(None if started is None else (started - t1) * 1000)
        if args.via == "inproc" and started is not None:
            from django.db import connection

            with connection.cursor() as c:
                c.execute("SELECT due FROM bench_stamp WHERE key = %s", [key])
                t0 = c.fetchone()[0]
        if i >= args.warmup:
            lat.append(None if started is None else (started - t0) * 1000)
    emit({"latency_ms": lat, "after_return_ms": after_return})


def cmd_enqueue_rate(args):
    """task.enqueue() per second (autocommit; a loop in one transaction.atomic()),
    enqueue_many() jobs/s, bulk API jobs/s, single API create times."""
    from django.db import transaction

    from scheduler_app import enqueue_many
    from scheduler_app.demo.tasks import noop

    out = {}
    for _ in range(args.warmup):
        noop.enqueue()
    with transaction.atomic():
        for _ in range(args.warmup):
            noop.enqueue()
    t0 = time.perf_counter()
    for _ in range(args.n):
        noop.enqueue()
    out["enqueue_per_s"] = args.n / (time.perf_counter() - t0)
    # A user enqueueing a batch in a view: the loop inside one transaction.
    t0 = time.perf_counter()
    with transaction.atomic():
        for _ in range(args.n):
            noop.enqueue()
    out["in_tx_per_s"] = args.n / (time.perf_counter() - t0)
    if args.many_calls:
        # scheduler_app.enqueue_many(items): --many-batch items per call (the
        # bulk API's 1,000 per request), then all of them in one call.
        def items(count):
            return [{"task": NOOP, "args": [], "kwargs": {}} for _ in range(count)]

        enqueue_many(items(args.warmup))
        batches = [items(args.many_batch) for _ in range(args.many_calls)]
        t0 = time.perf_counter()
        for batch in batches:
            enqueue_many(batch)
        out["enqueue_many_per_s"] = args.many_calls * args.many_batch / (time.perf_counter() - t0)
        everything = items(args.many_calls * args.many_batch)
        t0 = time.perf_counter()
        enqueue_many(everything)
        out["enqueue_many_one_call_per_s"] = len(everything) / (time.perf_counter() - t0)
    if args.url:
        api = Api(args.url, args.token)
        api.post("/api/jobs/", {"task": NOOP})  # warm up
        single = []
        for _ in range(args.single):
            t = time.perf_counter()
            api.post("/api/jobs/", {"task": NOOP})
            single.append((time.perf_counter() - t) * 1000)
        out["api_single_ms"] = single
        t0 = time.perf_counter()
        for _ in range(args.bulk_requests):
            api.post("/api/jobs/bulk/", {"jobs": [{"task": NOOP}] * 1000})
        out["api_bulk_per_s"] = args.bulk_requests * 1000 / (time.perf_counter() - t0)
    emit(out)


def cmd_explain(args):
    """EXPLAIN the hot queries and time them (claim rolled back)."""
    from django.db import connection, transaction

    from scheduler_app import lifecycle
    from scheduler_app.models import Job
    from scheduler_app.runtime.store import DjangoStore
    from scheduler_app.vocabulary.claims import ClaimRequest

    now = datetime.now(tz=UTC)
    queues = ["default", "slow"]
    store = DjangoStore("bench-explain", lease=30)
    window = (
        Job.objects.pending()
        .filter(queue__in=queues, execute_at__lte=dt(time.time() + 300))
        .order_by("execute_at", "id")
        .values_list("id", "execute_at", "priority", "queue")[:20000]
    )
    changes = (
        Job.objects.pending()
        .filter(queue__in=queues, updated_at__gte=dt(time.time() - 3))
        .values_list("id", "execute_at", "priority", "queue", "updated_at")
    )
    # The claim production runs (PostgreSQL: the one finish+claim statement;
    # SQLite: its claim by query), captured from the lifecycle call itself.
    captured = []

    def capture(execute, statement, params, many, context):
        captured.append((statement, params))
        return execute(statement, params, many, context)

    with transaction.atomic(), connection.execute_wrapper(capture):
        lifecycle.claim(ClaimRequest("bench-explain", tuple(queues), 4, 30.0, now))
        transaction.set_rollback(True)
    claim_sql, claim_params = captured[-1]
    queries = {
        "claim (4)": (claim_sql, claim_params),
        "window load": window.query.sql_with_params(),
        "changes poll": changes.query.sql_with_params(),
    }
    pg = connection.vendor == "postgresql"
    out = {}
    for name, (q, p) in queries.items():
        with transaction.atomic():
            with connection.cursor() as c:
                c.execute(("EXPLAIN (ANALYZE, BUFFERS) " if pg else "EXPLAIN QUERY PLAN ") + q, p)
                rows = c.fetchall()
            transaction.set_rollback(True)
        plan = "\n".join(r[0] for r in rows) if pg else "\n".join(str(r[-1]) for r in rows)
        times = []
        for _ in range(args.repeat):
            with transaction.atomic():
                with connection.cursor() as c:
                    t = time.perf_counter()
                    c.execute(q, p)
                    c.fetchall()
                    times.append((time.perf_counter() - t) * 1000)
                transaction.set_rollback(True)
        out[name] = {"plan": plan, "ms": times}
    # The store's own calls (ORM overhead included), read-only ones.
    for name, fn in (
        ("store.load_window", lambda: store.load_window({"default", "slow"}, time.time() + 300, 20000)),
        ("store.changes", lambda: store.changes({"default", "slow"}, time.time() - 3)),
    ):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1000)
        out[name] = {"plan": "", "ms": times}
    emit(out)


def cmd_set_limits(args):
    """Give the noop jobs' queue limits (none given: no limits)."""
    from scheduler_app import lifecycle
    from scheduler_app.models import QueueStart

    lifecycle.set_limits(args.queue, concurrency_limit=args.concurrency, rate_limit=args.rate, rate_period=args.period)
    QueueStart.objects.all().delete()  # every run starts from an empty rate window
    emit({"queue": args.queue})


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


def cmd_claim_cost(args):
    """Time the dispatcher's claim of 4 due jobs, by query, on its own connection: plain and limited.

    The queue holds ``--n`` due jobs; every claimed attempt is released back
    to pending at once, so each claim sees the same backlog. ``limited``
    claims run with the queue's limits set so that they never bind.
    """
    from scheduler_app import lifecycle
    from scheduler_app.models import QueueStart
    from scheduler_app.runtime.store import DjangoStore

    lifecycle.enqueue_many([{"task": NOOP}] * args.n, max_size=None)
    store = DjangoStore("bench-claims", lease=30)
    queues = {"default"}
    release = put_back(store)
    variants = {
        "plain (no limits)": ({}, lambda now: store.claim(queues, 4, now)),
        "concurrency_limit": ({"concurrency_limit": 1000}, lambda now: store.claim_limited(queues, 4, now)[0]),
        "rate_limit": ({"rate_limit": 10000, "rate_period": 1.0}, lambda now: store.claim_limited(queues, 4, now)[0]),
        "both limits": (
            {"concurrency_limit": 1000, "rate_limit": 10000, "rate_period": 1.0},
            lambda now: store.claim_limited(queues, 4, now)[0],
        ),
    }
    out = {}
    for name, (limits, claim) in variants.items():
        lifecycle.set_limits("default", concurrency_limit=None, rate_limit=None)
        if limits:
            lifecycle.set_limits("default", **limits)
        times = []
        for i in range(args.warmup + args.repeat):
            now = time.time()
            t = time.perf_counter()
            jobs = claim(now)
            elapsed = (time.perf_counter() - t) * 1000
            assert len(jobs) == 4, (name, len(jobs))
            release(jobs, now)
            if i >= args.warmup:
                times.append(elapsed)
        QueueStart.objects.all().delete()
        out[name] = times
    lifecycle.set_limits("default", concurrency_limit=None, rate_limit=None)
    store.reset()
    emit(out)


def main():
    setup_django("bench.settings_ours")
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    s = sub.add_parser("enqueue_noop")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--future", type=float, default=None)
    s.add_argument("--task", default=NOOP)
    s.add_argument("--stamp", action="store_true", help="stamp(key, due) jobs (bench/stamps.py)")
    s.add_argument("--keys", type=int, default=None, help="concurrency keys: 0 = one per job; K = K keys in turn")
    s.add_argument("--key-limit", type=int, default=1)
    s.add_argument("--queue", default=None, help="the jobs' queue (default: the task's)")
    s = sub.add_parser("enqueue_stamps")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--first", type=float, default=3.0)
    s.add_argument("--spread", type=float, default=10.0)
    s.add_argument("--busy", type=int, default=0, help="slots to hold with sleep_until jobs")
    s.add_argument("--busy-tail", type=float, default=1.0)
    s = sub.add_parser("pickup")
    s.add_argument("--n", type=int, default=50)
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--via", choices=["orm", "api", "inproc"], default="orm")
    s.add_argument("--url", default="")
    s.add_argument("--token", default="")
    s = sub.add_parser("enqueue_rate")
    s.add_argument("--n", type=int, default=1000)
    s.add_argument("--warmup", type=int, default=20)
    s.add_argument("--many-batch", type=int, default=1000)
    s.add_argument("--many-calls", type=int, default=10)
    s.add_argument("--single", type=int, default=200)
    s.add_argument("--bulk-requests", type=int, default=10)
    s.add_argument("--url", default="")
    s.add_argument("--token", default="")
    s = sub.add_parser("explain")
    s.add_argument("--repeat", type=int, default=30)
    s = sub.add_parser("set_limits")
    s.add_argument("--queue", default="default")
    s.add_argument("--concurrency", type=int, default=None)
    s.add_argument("--rate", type=int, default=None)
    s.add_argument("--period", type=float, default=1.0)
    s = sub.add_parser("claim_cost")
    s.add_argument("--n", type=int, default=1000)
    s.add_argument("--repeat", type=int, default=300)
    s.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    globals()["cmd_" + args.cmd](args)


if __name__ == "__main__":
    main()
