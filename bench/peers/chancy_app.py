"""chancy for the bench: the app, the ``stamp`` job and the worker (``python -m bench.peers.chancy_app``).

The worker follows chancy's guide: declare the queue (persisted in the
database; ``upsert`` replaces the previous run's settings), then run a
``Worker`` until SIGTERM. The queue keeps chancy's defaults (the process
executor, a 5 s polling interval) except what the variant sets.
Environment: BENCH_DSN, PEER_VARIANT (``default``: ``Queue("default",
concurrency=10)`` as the guide declares it; ``c4``: ``concurrency=4,
eager_polling=True``).
"""

import asyncio
import os

from chancy import Chancy, Queue, Worker

from bench.peers import pgstamp

app = Chancy(pgstamp.DSN)

QUEUES = {"default": Queue("default", concurrency=10), "c4": Queue("default", concurrency=4, eager_polling=True)}


def stamp(key, due):
    pgstamp.record(key, due)


async def main():
    async with app:
        await app.declare(QUEUES[os.environ.get("PEER_VARIANT", "default")], upsert=True)
        async with Worker(app) as worker:
            await worker.wait_for_shutdown()


if __name__ == "__main__":
    asyncio.run(main())
