"""The ``stamp`` and ``io`` job bodies for the peers that are not Django apps (pgqueuer, oban,
chancy, DBOS), and their database settings.

The same work as bench/stamps.py: ``time.time()`` first, then one INSERT into
``bench_stamp``, on a connection of the worker process (a sync connection per
process, or a pool of async connections sized like the worker's concurrency).
Environment: BENCH_DSN (the peer's own database).
"""

import asyncio
import os
import threading
import time

import psycopg

DSN = os.environ.get("BENCH_DSN", "")
INSERT = "INSERT INTO bench_stamp (key, due, started) VALUES (%s, %s, %s)"
IO_SECONDS = 0.05  # the I/O-bound job: await asyncio.sleep(IO_SECONDS)

_local = threading.local()
_pools = {}


def record(key, due):
    """A sync job's stamp: one INSERT on this thread's own connection (autocommit)."""
    started = time.time()  # first thing the job does
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = psycopg.connect(DSN, autocommit=True)
    conn.execute(INSERT, (str(key), float(due), started))


async def arecord(key, due, pool_size=10):
    """An async job's stamp: one INSERT on a connection of this event loop's pool."""
    started = time.time()
    loop = asyncio.get_running_loop()
    if loop not in _pools:  # one opening shared by the jobs that start before it is done
        _pools[loop] = asyncio.ensure_future(_open_pool(pool_size))
    pool = await _pools[loop]
    async with pool.connection() as conn:
        await conn.execute(INSERT, (str(key), float(due), started))


async def _open_pool(size):
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(DSN, min_size=1, max_size=size, kwargs={"autocommit": True}, open=False)
    await pool.open()
    return pool


async def io_sleep():
    await asyncio.sleep(IO_SECONDS)
