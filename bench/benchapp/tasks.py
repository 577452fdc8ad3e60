"""Bench-only django.tasks tasks: used by this project and by django-tasks-db."""

import logging

from django.tasks import task

from bench import stamps

logger = logging.getLogger(__name__)


@task
def noop(*args, **kwargs):
    return None


@task
def stamp(key, due):
    stamps.record(key, due)


@task
def relay(key):
    """Enqueue ``stamp`` from inside a running job (same-process pickup)."""
    import time

    stamp.enqueue(key=key, due=time.time())


@task
def log_one(*args, **kwargs):
    """A no-op that logs one INFO line (the per-job log cost: bench/run.py ``joblog``)."""
    logger.info("log_one ran")
    return None


@task
async def io_sleep(*args, **kwargs):
    """The I/O-bound job of bench/run.py ``io``: ``await asyncio.sleep(0.05)`` (served by an async queue)."""
    import asyncio

    await asyncio.sleep(0.05)


@task
def sleep_until(until):
    """Hold a slot until the epoch ``until`` (precision with busy slots: ``precision_busy``)."""
    import time

    while (left := until - time.time()) > 0:
        time.sleep(min(left, 0.1))


@task
def soak_span(key, seconds=0.2):
    """The soak's job (bench/soak.py): record its start, a tick every 20 ms while it runs, and its end.

    Overlapping runs are counted from the ticks (two runs of one job whose
    ticks interleave in time). A per-job lock file is held with ``flock``
    for the whole run as a second witness: the kernel releases it only when
    the process holding it dies, so a run that cannot take it at once ran
    while an earlier run of the same job was still alive. The records are
    appended to one file, a line per write (atomic).
    """
    import fcntl
    import os
    import threading
    import time

    directory = os.environ["SOAK_DIR"]
    run = f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
    lock = os.open(os.path.join(directory, f"{key}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
    records = os.open(os.path.join(directory, "records.log"), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # runs on all the same: the soak counts it
            os.write(records, f"overlap {key} {run} {time.time():.6f}\n".encode())
        os.write(records, f"start {key} {run} {time.time():.6f}\n".encode())
        end = time.monotonic() + seconds
        while True:
            os.write(records, f"tick {key} {run} {time.time():.6f}\n".encode())
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(0.02, left))
        os.write(records, f"end {key} {run} {time.time():.6f}\n".encode())
    finally:
        os.close(records)
        os.close(lock)  # releases the lock
    return key
