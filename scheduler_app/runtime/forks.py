"""A task that forks: its child never speaks for the slot and never outlives the attempt.

A task may call ``os.fork()`` (itself, or through ``multiprocessing``'s
``fork`` start method), in a worker process or on a slot thread of the
dispatcher. The child is a copy of that process: of a worker, with its pipe
to the dispatcher, or of the whole dispatcher (its signal handlers, its
database sessions) with the forking thread alone. A child that came back
out of the task took the next job from the worker's pipe and reported
outcomes for the slot, or waited for work forever as a copy of the
dispatcher, deaf to SIGTERM. In the processes that run attempts
(``install``, from ``executor.executor_for``):

* every forked child starts clean (``_in_child``): the Django connections
  it inherited are dropped without a word to the server (the parent's
  sessions are neither used nor closed by it: a query opens its own), and
  SIGTERM and SIGINT are back to their defaults;
* a child forked during an attempt also gets SIGKILL when the thread that
  forked it ends (Linux's parent-death signal), so it ends with its
  dispatcher or worker, kill -9 included; and one forked by the attempt's
  own process tells that process its pid before ``fork()`` returns there,
  so the attempt (``attempt``) kills and reaps it if it still runs when the
  task returns;
* a child that comes back out of the task (``call``) or out of the attempt
  exits at once with ``os._exit``: 0 after a return, the code of a
  ``SystemExit``, 1 after printing an exception's traceback. No caller's
  code, at-exit handler or connection close runs in it.

A worker process also ends what else the task left running: ``lifeline.end_children``.
"""

import contextlib
import contextvars
import os
import select
import signal
import sys
import threading
import traceback
from inspect import iscoroutinefunction

from asgiref.sync import async_to_sync
from django.tasks import Task

from . import lifeline

# The attempt running in this context: read by the fork hooks of its thread.
_attempt = contextvars.ContextVar("scheduler_attempt", default=None)
# The fork in progress on a thread: its parent's pid, the child's pid pipe.
_fork = threading.local()
# Connections a forked child inherited: kept referenced, so that no destructor closes them.
_inherited = []
# Seconds the parent waits for a forked child to say its pid (it does so first thing).
REPORT_TIMEOUT = 5.0

_installed = threading.Lock()


class Attempt:
    """The children one attempt's process forked (the forking thread appends, the attempt's thread ends them)."""

    def __init__(self):
        self.pid = os.getpid()
        self.children = []  # pids
        self.killed = 0  # how many were still running at its end

    def end_children(self):
        """Kill and reap the children still running; return how many were."""
        killed = sum(_end(pid) for pid in self.children)
        self.children.clear()
        return killed


def _end(pid):
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False  # it ended: reaped now
    except ChildProcessError:
        return False  # the task reaped it: its pid may be another process's by now
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return True


@contextlib.contextmanager
def attempt():
    """Run an attempt's block: yield its ``Attempt``; a forked child leaving it exits, the children left are ended.

    ``Attempt.killed`` then says how many children were still running.
    """
    current = Attempt()
    token = _attempt.set(current)
    try:
        yield current
    except BaseException as exc:
        exit_if_forked(current.pid, exc)
        raise
    else:
        exit_if_forked(current.pid)
    finally:
        # The parent only: a forked child never gets here.
        _attempt.reset(token)
        current.killed = current.end_children()


def call(task, *args, **kwargs):
    """Call ``task`` as ``Task.call`` does; a forked child coming back out of it exits at once."""
    if iscoroutinefunction(task.func):
        # The coroutine runs on asgiref's loop thread: a child forked there comes back out of it there.
        return async_to_sync(acall)(task, *args, **kwargs)
    pid = os.getpid()
    try:
        # What Task.call does for a function that is not a coroutine function (asked above already),
        # unless a Task class of its own calls it otherwise.
        value = task.func(*args, **kwargs) if type(task).call is Task.call else task.call(*args, **kwargs)
    except BaseException as exc:
        exit_if_forked(pid, exc)
        raise
    exit_if_forked(pid)
    return value


async def acall(task, *args, **kwargs):
    """Await ``async def`` task ``task`` on the running loop; a forked child coming back out of it exits at once."""
    pid = os.getpid()
    try:
        value = await task.func(*args, **kwargs)
    except BaseException as exc:
        exit_if_forked(pid, exc)
        raise
    exit_if_forked(pid)
    return value


def exit_if_forked(pid, exc=None):
    """In a process forked from ``pid``, end at once, as an uncaught ``exc`` (or a return) would end Python."""
    if os.getpid() == pid:
        return
    code = 0
    with contextlib.suppress(BaseException):
        if isinstance(exc, SystemExit) and (exc.code is None or isinstance(exc.code, int)):
            code = exc.code or 0
        elif isinstance(exc, SystemExit):
            code = 1
            print(exc.code, file=sys.stderr)
        elif exc is not None:
            code = 1
            traceback.print_exception(exc)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # what the child printed
    os._exit(code)


def install():
    """Register the fork hooks in this process (once; a dispatcher's or a worker process's)."""
    if _installed.acquire(blocking=False):
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_in_child)


def _before():
    _fork.parent = os.getpid()  # the child's parent, for its check after the prctl
    current = _attempt.get()
    _fork.report = os.pipe() if current is not None and current.pid == _fork.parent else None


def _after_in_parent():
    report, _fork.report = getattr(_fork, "report", None), None
    if report is None:
        return
    read, write = report
    os.close(write)
    data = b""
    try:
        # The child writes its pid first thing; EOF if it died first (or fork failed).
        poller = select.poll()
        poller.register(read, select.POLLIN)
        while poller.poll(REPORT_TIMEOUT * 1000) and (chunk := os.read(read, 32)):
            data += chunk
    finally:
        os.close(read)
    if data:
        _attempt.get().children.append(int(data))


def _in_child():
    report, _fork.report = getattr(_fork, "report", None), None
    if report is not None:
        read, write = report
        os.close(read)
        with contextlib.suppress(OSError):
            os.write(write, str(os.getpid()).encode())
        os.close(write)
    _drop_connections()
    for signum in (signal.SIGTERM, signal.SIGINT):  # the parent's handlers act on the parent's objects
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signum, signal.SIG_DFL)
    if _attempt.get() is not None:
        lifeline.parent_death_signal(signal.SIGKILL)
        if os.getppid() != getattr(_fork, "parent", None):  # the parent ended before the prctl: no signal is coming
            os.kill(os.getpid(), signal.SIGKILL)


def _drop_connections():
    """Forget the database connections this (forked) process inherited, without closing them.

    Closing one would end its session for the parent too (PostgreSQL's
    Terminate message goes down the shared socket). The next query here
    opens a connection of its own.
    """
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _inherited.append(conn.connection)
            conn.connection = None
        pools = getattr(type(conn), "_connection_pools", None)  # PostgreSQL's pool: its sockets are the parent's
        if pools and conn.alias in pools:
            _inherited.append(pools.pop(conn.alias))
