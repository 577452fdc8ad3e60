"""Driver for a peer (runs in bench/.venv-peers with bench.peers.settings; PEER selects it).

Each peer enqueues through its own public API; jobs are recorded by the
peer's own tables (throughput) or by the shared stamp task (timing). The
``stamp`` task also serves as the job that does a little work (one INSERT)
in the ``stamp`` throughput measurement.
"""

import argparse
import os
import random
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.drivers.common import create_stamp_table, emit, setup_django, wait_stamp

PEER = os.environ["PEER"]


def dt(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def enqueue_one(kind, at=None, **kwargs):
    """Enqueue one job of ``kind`` (noop | stamp), due at ``at`` (epoch) or now."""
    if PEER == "dtdb":
        from bench.benchapp import tasks

        t = getattr(tasks, kind)
        if at is not None:
            t = t.using(run_after=dt(at))
        t.enqueue(**kwargs)
    elif PEER == "procrastinate":
        from bench.peers.procapp import tasks

        t = getattr(tasks, kind)
        if at is not None:
            t.configure(schedule_at=dt(at)).defer(**kwargs)
        else:
            t.defer(**kwargs)
    elif PEER == "djangoq":
        func = f"bench.peers.qtasks.{kind}"
        if at is None:
            from django_q.tasks import async_task

            async_task(func, **kwargs)
        else:
            # django-q2 has no per-task ETA: a one-off Schedule is its way.
            from django_q.models import Schedule

            Schedule.objects.create(func=func, kwargs=kwargs, schedule_type=Schedule.ONCE, repeats=1, next_run=dt(at))


def cmd_setup(args):
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    create_stamp_table()
    emit({})


def cmd_enqueue_noop(args):
    """Enqueue ``--n`` due no-op jobs (with ``--stamp``: ``stamp(key, due)`` jobs, one INSERT each)."""
    from django.db import transaction

    kind = "stamp" if args.stamp else "noop"
    due = time.time()
    kwargs = [{"key": f"s{i}", "due": due} if args.stamp else {} for i in range(args.n)]
    t0 = time.perf_counter()
    if PEER == "procrastinate":
        from bench.peers.procapp import tasks

        for start in range(0, args.n, 1000):
            getattr(tasks, kind).batch_defer(*kwargs[start : start + 1000])
    else:
        with transaction.atomic():
            for kw in kwargs:
                enqueue_one(kind, **kw)
    emit({"seconds": time.perf_counter() - t0})


def cmd_enqueue_stamps(args):
    base = time.time()
    for i in range(args.n):
        due = base + args.first + i * args.spread / args.n
        enqueue_one("stamp", at=due, key=f"t{i}", due=due)
    emit({"base": base, "enqueued_in": time.time() - base})


def cmd_pickup(args):
    lat, after_return = [], []
    for i in range(args.n + args.warmup):
        time.sleep(random.uniform(0.05, 0.15))
        key = f"p{i}"
        t0 = time.time()
        enqueue_one("stamp", key=key, due=t0)
        t1 = time.time()  # the enqueue committed and returned
        started = wait_stamp(key, timeout=args.timeout)
        if i >= args.warmup:
            lat.append(None if started is None else (started - t0) * 1000)
            after_return.append(None if started is None else (started - t1) * 1000)
    emit({"latency_ms": lat, "after_return_ms": after_return})


def cmd_enqueue_rate(args):
    """Its enqueue call per second: in autocommit, and a loop in one transaction.atomic()."""
    from django.db import transaction

    for _ in range(args.warmup):
        enqueue_one("noop")
    with transaction.atomic():
        for _ in range(args.warmup):
            enqueue_one("noop")
    out = {}
    t0 = time.perf_counter()
    for _ in range(args.n):
        enqueue_one("noop")
    out["enqueue_per_s"] = args.n / (time.perf_counter() - t0)
    # A user enqueueing a batch in a view: the same call in a loop inside one
    # transaction (procrastinate's Django connector runs defer() on Django's
    # connection, so it joins the transaction like the others).
    t0 = time.perf_counter()
    with transaction.atomic():
        for _ in range(args.n):
            enqueue_one("noop")
    out["in_tx_per_s"] = args.n / (time.perf_counter() - t0)
    if PEER == "procrastinate" and args.many_calls:
        # Its bulk call (the others have none): batch_defer(), --many-batch jobs per call,
        # as this project's enqueue_many() is measured.
        from bench.peers.procapp import tasks

        tasks.noop.batch_defer(*[{}] * args.warmup)
        t0 = time.perf_counter()
        for _ in range(args.many_calls):
            tasks.noop.batch_defer(*[{}] * args.many_batch)
        out["bulk_per_s"] = args.many_calls * args.many_batch / (time.perf_counter() - t0)
    emit(out)


def main():
    setup_django("bench.peers.settings")
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    s = sub.add_parser("enqueue_noop")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--stamp", action="store_true", help="stamp(key, due) jobs (bench/stamps.py)")
    s = sub.add_parser("enqueue_stamps")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--first", type=float, default=3.0)
    s.add_argument("--spread", type=float, default=10.0)
    s = sub.add_parser("pickup")
    s.add_argument("--n", type=int, default=50)
    s.add_argument("--warmup", type=int, default=3)
    s.add_argument("--timeout", type=float, default=30.0)
    s = sub.add_parser("enqueue_rate")
    s.add_argument("--n", type=int, default=1000)
    s.add_argument("--warmup", type=int, default=20)
    s.add_argument("--many-batch", type=int, default=1000, help="jobs per bulk call (procrastinate)")
    s.add_argument("--many-calls", type=int, default=0, help="bulk calls timed (procrastinate; 0: none)")
    args = p.parse_args()
    globals()["cmd_" + args.cmd](args)


if __name__ == "__main__":
    main()
