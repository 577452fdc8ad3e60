"""Bench-only django.tasks tasks: used by this project and by django-tasks-db."""

import logging

from django.tasks import task

from bench import stamps


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


log = logging.getLogger(__name__)


@task
def log_one(*args, **kwargs):
    """A no-op that logs one INFO line (the cost of per-job log capture)."""
    log.info("one line from job with %d args", len(args))
