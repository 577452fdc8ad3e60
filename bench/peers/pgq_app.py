"""pgqueuer's consumer for the bench: ``pgq run bench.peers.pgq_app:main`` (its documented way).

The factory is an async context manager yielding the ``PgQueuer``: what
``pgq run`` of pgqueuer 1.6 asks of it (a bare coroutine is refused).
Entrypoints ``stamp`` (payload: JSON ``{"key", "due"}``; bench/peers/pgstamp.py)
and ``io`` (``await asyncio.sleep(0.05)``). The connection is asyncpg, as
pgqueuer's quick start has it. Environment: BENCH_DSN.
"""

import json
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

from bench.peers import pgstamp


@asynccontextmanager
async def main():
    connection = await asyncpg.connect(pgstamp.DSN)
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("stamp")
    async def stamp(job: Job) -> None:
        data = json.loads(job.payload)
        await pgstamp.arecord(data["key"], data["due"])

    @pgq.entrypoint("io")
    async def io(job: Job) -> None:
        await pgstamp.io_sleep()

    try:
        yield pgq
    finally:
        await connection.close()
