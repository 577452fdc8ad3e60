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
def sleep_until(until):
    """Hold a slot until the epoch ``until`` (precision with busy slots: ``precision_busy``)."""
    import time

    while (left := until - time.time()) > 0:
        time.sleep(min(left, 0.1))
