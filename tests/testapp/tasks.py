"""Task functions used by the tests (one module, as STYLE.md asks)."""

import asyncio
import os
import subprocess
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


# -- per-task options (scheduler_app.validation.options) --------------------------------

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
    """CPU-bound: return [start, end, pid]: the work's own wall times, and the process that did it."""
    started = time.time()
    total = 0
    for i in range(iterations):
        total += i * i
    return [started, time.time(), os.getpid()]


@task
def spin(marker_dir=None):
    """Never returns and never yields: only a process can stop it. Writes its start time first, if told where."""
    if marker_dir:
        _write(os.path.join(marker_dir, "spin-started"), str(time.time()))
    while True:
        pass


def _write(path, text):
    """Write ``text`` at ``path`` whole: a reader sees the old state or all of it."""
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(path + ".tmp", path)


@task
def family(marker_dir, name, seconds=30.0):
    """Start a child process (``sleep``), write ``"<own pid> <its pid>"`` in ``pids-NAME``, then sleep.

    Process-queue tests: the worker process and what its task started must both go with it.
    """
    child = subprocess.Popen(["sleep", str(max(seconds, 1) * 10)])
    _write(os.path.join(marker_dir, f"pids-{name}"), f"{os.getpid()} {child.pid}")
    time.sleep(seconds)
    return os.getpid()


@task(takes_context=True)
def deadline_seen(context, seconds=0.0):
    """Return ``[start, context.deadline, context.time_left()]`` as the task saw them at its start, after ``seconds``."""
    started, deadline, left = time.time(), context.deadline, context.time_left()
    time.sleep(seconds)
    return [started, deadline, left]


@task
def exits(code=3, how="sys.exit"):
    """End the attempt the wrong way: ``sys.exit(code)``, ``os._exit(code)`` or ``kill`` (SIGKILL itself)."""
    import signal
    import sys

    if how == "os._exit":
        os._exit(code)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(code)


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


# -- per-job logs (scheduler_app.observability.joblogs) ------------------------------------------

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

from scheduler_app import Snooze  # noqa: E402 - with the tasks that use it


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


# -- values no database stores as they are (invariant 13) -----------------------


@task
def returns_nul():
    return {"text": "a\x00b", "name\x00": ["bad file-\udcff.txt"]}


@task
def raises_surrogate():
    raise ValueError("bad file-\udcff.txt\x00")


@task
def logs_badly():
    logging.getLogger("tests.testapp.bad").log(40000, "level 40000 \x00 and \udcff")
    logging.getLogger("x" * 250 + "\x00" + "y" * 20).warning("a long name with a NUL")
    return "logged"


@task(takes_context=True)
def progress_nul(context):
    context.set_progress(1, 2, "half \x00 \udcff")
    return "ok"


def _even_only(args, kwargs):
    """An @options(validate=...) check: a plain message, a field's message, or a broken check."""
    from django.core.exceptions import ValidationError

    if kwargs.get("broken"):
        raise RuntimeError("the check itself broke")
    if kwargs.get("note") == "bad":
        raise ValidationError({"kwargs": ["note may not be 'bad'."]})
    if args and isinstance(args[0], int) and args[0] % 2:
        raise ValidationError("Must be even.")


@options(validate=_even_only)
@task
def even(n, note="", broken=False):
    return n


@task(takes_context=True)
def reports(context, current, total=None, message=""):
    """Report the progress it is given, as it is (the rule of set_progress judges it)."""
    return context.set_progress(current, total, message)


# Workflows (tests/lifecycle/test_workflows.py): results passed along.
@task
def double(x):
    return x * 2


@task
def total(values, extra=0):
    return sum(values) + extra


@task
def echo(*args):
    return list(args)


@task(takes_context=True)
def workflow_seen(context, *args):
    return context.workflow_id


@task
def stamp(marker_dir, name, *passed):
    """Write a file named ``name`` in ``marker_dir`` (one per run: the callbacks' exactly-once test counts them)."""
    import uuid

    _write(os.path.join(marker_dir, f"{name}-{uuid.uuid4().hex}"), name)
    return name


# -- concurrency keys and expiry (scheduler_app.validation.admission) --------------------------


@options(concurrency_key="account:{account_id}", concurrency_limit=2, expires_in="1h")
@task(takes_context=True)
def keyed_span(context, marker_dir, account_id, seconds=0.1):
    """``span`` under a key per account: the file's name says the account, its text the start and end."""
    started = time.time()
    time.sleep(seconds)
    ended = time.time()
    name = f"{account_id}-{context.job_id}-{context.attempt}-{os.getpid()}"
    with open(os.path.join(marker_dir, name), "w") as fh:
        fh.write(f"{started} {ended}")
    return context.job_id


@task
def logs_then_waits(marker_dir, lines=3, more=2, seconds=60.0):
    """Log ``lines`` lines, wait until ``marker_dir/release`` exists, log ``more``: a running job's live log (threads and processes)."""
    for i in range(lines):
        log.info("line %d", i + 1)
    release = os.path.join(marker_dir, "release")
    end = time.monotonic() + seconds
    while not os.path.exists(release) and time.monotonic() < end:
        time.sleep(0.02)
    for i in range(lines, lines + more):
        log.info("line %d", i + 1)
    return lines + more


@task
def stubborn(marker_dir, name, seconds=30.0, ignore_term=False):
    """Ignore cancels (and, with ``ignore_term``, SIGTERM): write ``pid-NAME``, sleep, then ``finished-NAME``."""
    import signal

    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(marker_dir, f"pid-{name}"), "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(seconds)
    with open(os.path.join(marker_dir, f"finished-{name}"), "w") as fh:
        fh.write(str(os.getpid()))
    return os.getpid()


@task
def chatty_snoozer(key, times=1):
    """Log a line on every run and snooze the first ``times`` (a snoozed attempt's number is used again)."""
    snoozes = _SNOOZES.get(key, 0)
    log.info("run %d", snoozes + 1)
    if snoozes < times:
        _SNOOZES[key] = snoozes + 1
        raise Snooze(0.0)
    return snoozes


@options(tags=["billing", "nightly"])
@task
def tagged(x=None):
    """A task whose jobs carry tags unless the caller gives its own."""
    return x


@task(takes_context=True)
def ticker(context, marker_dir, seconds=2.0):
    """Write ``job run time`` to the job's file every 20 ms while it runs: overlapping runs are read from it."""
    run = f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
    end = time.monotonic() + seconds
    path = os.path.join(marker_dir, f"ticks-{context.job_id}")
    while True:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{context.job_id} {run} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)
        if time.monotonic() >= end:
            return context.job_id
        time.sleep(0.02)


@task
def forks(marker_dir, name, child_seconds=0.0, parent_seconds=0.0, child_exit=None, wait=False):
    """Fork, and come back out of the task in both processes, as a careless task does.

    The child writes ``child-NAME`` (its pid), sleeps ``child_seconds``, then
    returns ``"child"`` (or calls ``sys.exit(child_exit)``). The parent waits
    for that file and sleeps ``parent_seconds``; with ``wait`` it waits (30 s
    at most) for the child to end and returns its exit code, else ``"parent"``.
    """
    import sys

    path = os.path.join(marker_dir, f"child-{name}")
    child = os.fork()
    if child == 0:
        _write(path, str(os.getpid()))
        time.sleep(child_seconds)
        if child_exit is not None:
            sys.exit(child_exit)
        return "child"
    end = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.005)
    time.sleep(parent_seconds)
    if not wait:
        return "parent"
    while time.monotonic() < end:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    return "the child still runs"


@task
async def async_forks(marker_dir, name, child_exit=None):
    """``forks`` (``wait``) from a coroutine, which runs on asgiref's loop thread."""
    return forks.func(marker_dir, name, child_exit=child_exit, wait=True)


@task
def leaves_behind(marker_dir, name):
    """Start two ``sleep`` processes and return: a child, and an orphan in a session of its own.

    Writes their pids in ``left-NAME``.
    """
    child = subprocess.Popen(["sleep", "600"])
    shell = subprocess.run(
        ["sh", "-c", "setsid sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True
    )
    _write(os.path.join(marker_dir, f"left-{name}"), f"{child.pid} {shell.stdout.strip()}")
    return "left"


@task
def echo_kwargs(**kwargs):
    """Return the keyword arguments it was called with (what the task really received)."""
    return kwargs


@task
def leaky(**kwargs):
    """Log and raise with its secret argument (the scheduler must keep [FILTERED] in what it stores)."""
    logging.getLogger("tests.leaky").warning("logging in with %s", kwargs.get("password"))
    raise ValueError(f"login refused for password {kwargs.get('password')}")


# The asyncio lane's tests: what the attempts on one loop saw, by key (same process: a dispatcher on a thread).
lane_seen = {}
_lane_lock = threading.Lock()


def _lane_record(key):
    with _lane_lock:
        return lane_seen.setdefault(key, {"running": 0, "most": 0, "threads": set(), "cancelled": 0, "ended": 0})


@task
async def async_overlap(key, gather=1, seconds=0.0):
    """Wait until ``gather`` attempts of ``key`` run at once (60 s at most), then ``seconds``; record where they ran."""
    seen = _lane_record(key)
    seen["threads"].add(threading.get_ident())
    seen["running"] += 1
    seen["most"] = max(seen["most"], seen["running"])
    try:
        end = time.monotonic() + 60
        while seen["most"] < gather and time.monotonic() < end:
            await asyncio.sleep(0.005)
        await asyncio.sleep(seconds)
    finally:
        seen["running"] -= 1
    return seen["most"]


@task(takes_context=True)
async def async_waits(context, key, seconds=30.0):
    """Await ``seconds`` (log a line first); count a cancel that reached it (CancelledError) in ``lane_seen``."""
    seen = _lane_record(key)
    log.info("async %s waiting", key)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        seen["cancelled"] += 1
        raise
    seen["ended"] += 1
    return key


@task(takes_context=True)
async def async_progress(context, steps=3):
    """Report progress on the loop (``set_progress``, not waiting) and off it (``aset_progress``, its answer)."""
    context.set_progress(1, steps, "on the loop")
    current = await context.aset_progress(steps, steps, "awaited")
    log.info("progress written: %s", current)
    await asyncio.sleep(0)
    return current


@task(takes_context=True)
async def async_ticker(context, marker_dir, seconds=2.0, stubborn=False):
    """``ticker`` on the loop: a line every 20 ms while it runs; ``cancelled-ID`` when a cancel reached it.

    A ``stubborn`` one swallows its cancels and ticks on.
    """
    run = f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
    end = time.monotonic() + seconds
    path = os.path.join(marker_dir, f"ticks-{context.job_id}")
    while True:
        with open(path, "a") as out:
            out.write(f"{context.job_id} {run} {time.time():.6f}\n")
        if time.monotonic() >= end:
            return context.job_id
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            with open(os.path.join(marker_dir, f"cancelled-{context.job_id}"), "a") as out:
                out.write(f"{run}\n")
            if not stubborn:
                raise


@task
def thread_name():
    """Return the name of the thread that runs it."""
    return threading.current_thread().name


@task
async def async_thread_name():
    """Return the name of the thread whose loop runs it."""
    await asyncio.sleep(0)
    return threading.current_thread().name


@task
async def async_boom(message="boom"):
    await asyncio.sleep(0)
    raise ValueError(message)


@task(takes_context=True)
async def async_snoozer(context, key):
    """Snooze the first run (no time), return the second's count of runs."""
    seen = _lane_record(key)
    seen["ended"] += 1
    log.info("run %d", seen["ended"])
    if seen["ended"] == 1:
        context.snooze(0)
    return seen["ended"]
