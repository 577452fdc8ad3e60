"""Task functions used by the tests (one module, as STYLE.md asks)."""

import asyncio
import os
import threading
import time

from django.tasks import task

from scheduler_app.context import JobCancelled


@task
def add(a, b):
    return a + b


@task
def noop(*args, **kwargs):
    return None


@task(priority=10, queue_name="other")
def important(x=None):
    return x


@task
def boom(message="boom"):
    raise ValueError(message)


@task
def unserializable():
    return object()


@task(takes_context=True)
def record(context, marker_dir, name):
    """Write a file named after the job id and attempt: proves it ran, and how often."""
    path = os.path.join(marker_dir, f"{context.job_id}-{name}-{context.attempt}-{os.getpid()}-{time.time_ns()}")
    with open(path, "w") as fh:
        fh.write(str(time.time()))
    # Process tests slow jobs down so a kill lands mid-run.
    time.sleep(float(os.environ.get("SCHEDULER_TEST_RECORD_SLEEP", "0")))
    return name


@task(takes_context=True)
def cooperative(context, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if context.cancel_requested:
            raise JobCancelled()
        time.sleep(0.01)
    return "finished"


# Lets `blocker` jobs return. Module state, so it reaches only the worker
# threads of this process: for dispatchers a test runs on a thread.
RELEASE = threading.Event()


@task
def blocker(seconds=30.0):
    """Run until a test sets RELEASE (at most ``seconds``), deaf to cancel requests."""
    return RELEASE.wait(seconds)


@task
def sleeper(seconds=1.0):
    time.sleep(seconds)
    return seconds


@task(takes_context=True)
def context_info(context):
    return {
        "job_id": context.job_id,
        "attempt": context.attempt,
        "deadline": context.deadline,
        "result_id": context.task_result.id,
    }


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    return a + b


@task
def flaky(marker_dir, fail_times=1):
    """Fail the first `fail_times` calls (counted with files), then succeed."""
    count = len(os.listdir(marker_dir))
    with open(os.path.join(marker_dir, f"call-{count}"), "w"):
        pass
    if count < fail_times:
        raise RuntimeError(f"failure {count + 1}")
    return count


@task(takes_context=True)
def cancel_stamp(context, marker_dir, seconds=30.0):
    """Write 'started', then poll cancel_requested; write the moment it turned true."""
    with open(os.path.join(marker_dir, "started"), "w") as fh:
        fh.write(str(time.time()))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if context.cancel_requested:
            with open(os.path.join(marker_dir, "cancel-seen"), "w") as fh:
                fh.write(str(time.time()))
            raise JobCancelled()
        time.sleep(0.002)
    return "not cancelled"


# -- per-task options (scheduler_app.task_options) --------------------------------

from scheduler_app import options  # noqa: E402


@options(max_attempts=5, timeout=30, backoff=0, unique=True)
@task(queue_name="slow")
def with_options(x):
    return x


@options(max_attempts=4, retry_on=(ConnectionError,), backoff=0)
@task
def picky(kind, marker_dir=None):
    """Raise ConnectionError (retried) or ValueError (not retried)."""
    if marker_dir:
        count = len(os.listdir(marker_dir))
        with open(os.path.join(marker_dir, f"call-{count}"), "w"):
            pass
    raise ConnectionError("down") if kind == "connection" else ValueError("bad input")


def account_key(account_id, note=""):
    return f"account-{account_id}"


@options(unique=account_key)
@task
def per_account(account_id, note=""):
    return account_id


@task
def fails_twice(counter_key):
    """Fail on the first two calls for ``counter_key`` (counted in memory), then succeed."""
    calls = _CALLS.setdefault(counter_key, 0) + 1
    _CALLS[counter_key] = calls
    if calls <= 2:
        raise RuntimeError(f"failure {calls}")
    return calls


_CALLS = {}


@task
def burn(iterations=3_000_000):
    """CPU-bound: return [start, end] wall times of the work itself (process-queue tests)."""
    started = time.time()
    total = 0
    for i in range(iterations):
        total += i * i
    return [started, time.time()]


@task
def spin():
    """Never returns and never yields: only a process can stop it."""
    while True:
        pass


@task
def pid_then_sleep(marker_dir, name, seconds=30.0):
    """Write ``name`` holding this process's pid, then sleep (a target for kill -9)."""
    with open(os.path.join(marker_dir, f"pid-{name}"), "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


@task(takes_context=True)
def progress_until_cancelled(context, seconds=30.0):
    """Report progress, then wait for a cancel request (process-queue tests: both cross the boundary)."""
    context.set_progress(1, 2, f"pid {os.getpid()}")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if context.cancel_requested:
            raise JobCancelled()
        time.sleep(0.01)
    return "not cancelled"


# -- per-job logs (scheduler_app.joblogs) ------------------------------------------

import logging  # noqa: E402

log = logging.getLogger("tests.testapp.tasks")


@task
def chatty(lines=3, fail=False):
    """Log ``lines`` INFO lines (and a DEBUG one, not kept), then maybe raise after an ERROR with a traceback."""
    log.debug("debug is below the default level")
    logging.getLogger("scheduler_app.fake").info("the scheduler's own loggers are not kept")
    for i in range(lines):
        log.info("line %d of %d", i + 1, lines)
    if fail:
        try:
            raise KeyError("missing")
        except KeyError:
            log.exception("could not find it")
        raise ValueError("chatty failed")
    return lines


@task
async def async_chatty():
    log.warning("from an async task")
    return 1


@task(takes_context=True)
def slow_progress(context, steps=20, pause=0.1):
    """Report progress step by step (the browser test watches it move)."""
    for i in range(steps):
        context.set_progress(i + 1, steps, f"step {i + 1}")
        log.info("step %d", i + 1)
        time.sleep(pause)
    return steps


isolated = logging.getLogger("tests.isolated")
isolated.propagate = False  # records never reach the root logger
isolated.addHandler(logging.NullHandler())
isolated.setLevel(logging.INFO)


@task
def isolated_logger():
    isolated.info("kept although it never reaches the root logger")
    return 1


# -- flow control (issue 14) --------------------------------------------------

from scheduler_app import Snooze


@task(takes_context=True)
def span(context, marker_dir, seconds=0.1):
    """Record this attempt's own start and end (epoch seconds) in a file: overlaps are counted from them."""
    started = time.time()
    time.sleep(seconds)
    ended = time.time()
    with open(os.path.join(marker_dir, f"{context.job_id}-{context.attempt}-{os.getpid()}"), "w") as fh:
        fh.write(f"{started} {ended}")
    return context.job_id


@task(takes_context=True)
def snoozer(context, key, times=1, seconds=0.0, use_context=False):
    """Snooze the first ``times`` runs for ``key`` (counted in memory), then return how many it snoozed."""
    snoozes = _SNOOZES.get(key, 0)
    if snoozes < times:
        _SNOOZES[key] = snoozes + 1
        if use_context:
            context.snooze(seconds)
        raise Snooze(seconds)
    return snoozes


_SNOOZES = {}


@task
def always_snooze(seconds=0.0):
    raise Snooze(seconds)


@options(unique_for=60)
@task
def once_a_minute(x):
    return x


@task(takes_context=True)
def reports(context, current, total=None, message=""):
    """Report the progress it is given, as it is (the rule of set_progress judges it)."""
    return context.set_progress(current, total, message)
