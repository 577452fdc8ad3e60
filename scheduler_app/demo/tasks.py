"""Demo tasks: small, harmless, and each showing one behaviour."""

import asyncio
import logging
import time

from django.tasks import task

from ..context import JobCancelled

# What a task logs while it runs is kept with its attempt (the job page's "Logs").
log = logging.getLogger(__name__)


@task
def noop(*args, **kwargs):
    """Do nothing; return None (benchmarks use this)."""
    return None


@task
def echo(*args, **kwargs):
    """Return the arguments it was given."""
    log.info("echoing %d args and %d kwargs", len(args), len(kwargs))
    return {"args": list(args), "kwargs": kwargs}


@task(queue_name="slow", takes_context=True)
def sleep(context, seconds=1.0):
    """Sleep for `seconds`, stopping early if cancelled; return the seconds slept."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if context.cancel_requested:
            raise JobCancelled()
        time.sleep(min(0.05, max(0.0, seconds - (time.monotonic() - start))))
    return round(time.monotonic() - start, 3)


@task
def fail(message="This demo task always fails."):
    """Raise RuntimeError(message): shows retries, backoff, error tracebacks and logs."""
    log.info("about to fail on purpose")
    log.warning("this attempt will raise RuntimeError(%r)", message)
    raise RuntimeError(message)


@task(takes_context=True)
def progress(context, steps=10, delay=0.5):
    """Count to `steps`, reporting progress after each; honours cancellation."""
    for step in range(1, steps + 1):
        if context.cancel_requested:
            raise JobCancelled()
        time.sleep(delay)
        context.set_progress(step, steps, f"step {step} of {steps}")
        log.info("step %d of %d done", step, steps)
    return steps


@task
async def async_sleep(seconds=0.1):
    """An async task: await asyncio.sleep(seconds); return the seconds."""
    await asyncio.sleep(seconds)
    return seconds
