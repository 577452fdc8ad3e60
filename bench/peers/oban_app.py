"""oban's (the Python port's) workers for the bench, run by ``oban start --queues default:N``.

The job records ``worker`` as this module's class path; ``oban start`` imports
it from there (the process runs with the repository on PYTHONPATH).
Environment: BENCH_DSN (bench/peers/pgstamp.py).
"""

from oban import worker

from bench.peers import pgstamp


@worker(queue="default")
class Stamp:
    async def process(self, job):
        await pgstamp.arecord(job.args["key"], job.args["due"])


@worker(queue="default")
class Io:
    async def process(self, job):
        await pgstamp.io_sleep()
