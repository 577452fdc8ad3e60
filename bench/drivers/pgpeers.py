"""Driver for the peers that are not Django apps: pgqueuer, oban, chancy, DBOS (run in
bench/.venv-peers; PEER selects, BENCH_DSN names the peer's own database).

    setup                          install the peer's schema, create bench_stamp
    enqueue_noop --n N --stamp     N due ``stamp(key, due)`` jobs through the peer's own enqueue API
    enqueue_noop --n N --task io   N due ``io`` jobs (``await asyncio.sleep(0.05)``; pgqueuer, oban)

Each job's code lives in bench/peers/ (``pgq_app``, ``oban_app``,
``chancy_app``, ``dbos_app``); run.py starts the workers with the peer's own
command.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from bench import stamps  # noqa: E402
from bench.drivers.common import emit  # noqa: E402

PEER = os.environ["PEER"]
DSN = os.environ["BENCH_DSN"]
BIN = os.path.dirname(sys.executable)
CHUNK = 1000


def peer_cli(*argv):
    subprocess.run([os.path.join(BIN, argv[0]), *argv[1:]], check=True, cwd=ROOT, capture_output=True)


def cmd_setup(args):
    import psycopg

    if PEER == "pgqueuer":
        peer_cli("pgq", "--pg-dsn", DSN, "install")
    elif PEER == "oban":
        peer_cli("oban", "install", "--dsn", DSN)
    elif PEER == "chancy":
        from bench.peers.chancy_app import app

        async def migrate():
            async with app:
                await app.migrate()

        asyncio.run(migrate())
    elif PEER == "dbos":
        subprocess.run([sys.executable, "-m", "bench.peers.dbos_app", "--setup"], check=True, cwd=ROOT)
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(stamps.DDL)
    emit({})


def jobs(args):
    """(key, due) of each job: ``stamp`` jobs; ``io`` jobs take none (keys only count them)."""
    due = time.time()
    return [(f"s{i}", due) for i in range(args.n)]


async def enqueue_pgqueuer(args):
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(DSN)
    try:
        queries = Queries(AsyncpgDriver(conn))
        todo = jobs(args)
        for start in range(0, len(todo), CHUNK):
            part = todo[start : start + CHUNK]
            payloads = [json.dumps({"key": k, "due": d}).encode() if args.kind == "stamp" else None for k, d in part]
            await queries.enqueue([args.kind] * len(part), payloads, [0] * len(part))
    finally:
        await conn.close()


async def enqueue_oban(args):
    from oban import Oban

    from bench.peers.oban_app import Io, Stamp

    pool = await Oban.create_pool(DSN, min_size=1, max_size=1)
    try:
        oban = Oban(pool=pool)  # no queues: an enqueueing client
        todo = jobs(args)
        for start in range(0, len(todo), CHUNK):
            part = todo[start : start + CHUNK]
            made = [Stamp.new({"key": k, "due": d}) if args.kind == "stamp" else Io.new({}) for k, d in part]
            await oban.enqueue_many(made)
    finally:
        await pool.close()


async def enqueue_chancy(args):
    from chancy import Job

    from bench.peers.chancy_app import app, stamp

    async with app:
        made = [Job.from_func(stamp, queue="default", kwargs={"key": k, "due": d}) for k, d in jobs(args)]
        async for _ in app.push_many(made, batch_size=CHUNK):
            pass


def enqueue_dbos(args):
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=DSN)
    try:
        for key, due in jobs(args):
            client.enqueue({"queue_name": "bench", "workflow_name": "bench_stamp"}, key, due)
    finally:
        client.destroy()


def cmd_enqueue_noop(args):
    """The harness's ``enqueue_noop``: these peers have ``stamp`` and ``io`` jobs only."""
    if args.stamp == (args.task is not None):
        raise SystemExit("give --stamp or --task io")
    args.kind = "stamp" if args.stamp else args.task
    if args.kind == "io" and PEER not in ("pgqueuer", "oban"):
        raise SystemExit(f"{PEER} has no io job here")
    t0 = time.perf_counter()
    if PEER == "dbos":
        enqueue_dbos(args)
    else:
        asyncio.run(globals()[f"enqueue_{PEER}"](args))
    emit({"seconds": time.perf_counter() - t0})


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    s = sub.add_parser("enqueue_noop")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--stamp", action="store_true")
    s.add_argument("--task", choices=("io",))
    args = p.parse_args()
    globals()["cmd_" + args.cmd](args)


if __name__ == "__main__":
    main()
