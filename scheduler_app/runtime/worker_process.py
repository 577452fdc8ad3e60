"""One worker process of a process-mode queue: the child's side, and the handle the dispatcher keeps.

The child talks to the dispatcher over one pipe:

    child -> ("ready", None)          Django is set up: send an attempt
    parent -> ClaimedJob              run it (None: exit)
    child -> ("started", deadline)    the task starts now; its deadline (epoch
                                      seconds, None without a timeout) counts
                                      from here, not from the hand-over
    child -> ("outcome", Outcome)     how the attempt ended

The child binds itself to its parent first (``lifeline.bind_to_parent``): a
group of its own, which it kills when the dispatcher is gone. After each
attempt, before its outcome, it ends every process the task left running
(``lifeline.end_children``): nothing of an attempt runs on beside the next.
A child the task forked never gets back to this loop (``forks.py``).
"""

import contextlib
import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime

from . import lifeline

_WAITID = hasattr(os, "waitid")  # Linux; macOS from Python 3.13

logger = logging.getLogger(__name__)


def child_main(conn, cancel, settings_module, using, parent_pid):
    """A worker process: set Django up once, then run the attempts the parent sends."""
    lifeline.bind_to_parent(parent_pid)  # before anything slow: the dispatcher may die during the setup
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    import django

    django.setup()
    # The app's start-up holds SIGTERM for a starting dispatcher (the child runs
    # with the dispatcher's argv); a worker process ends on it (CANCEL_GRACE).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from .executor import executor_for  # Django is set up only now

    policy, executor = executor_for(using)  # as a thread slot's, per-job log capture included
    conn.send(("ready", None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the dispatcher is gone
            return
        if job is None:
            return
        deadline = time.time() + job.timeout if job.timeout else None
        conn.send(("started", deadline))
        try:
            outcome = executor(job, cancel, deadline)
        except BaseException as exc:  # noqa: BLE001 - the executor reports the task's own; this escaped it (a receiver?)
            outcome = policy.raised(job, exc, datetime.now(UTC))
        if left := lifeline.end_children():
            logger.info(
                "job %s: killed %d processes its task left running",
                job.id,
                left,
                extra={"job_id": job.id, "action": "forked"},
            )
        conn.send(("outcome", outcome))


def ending(code):
    """Say how a process with exit code ``code`` ended (a negative code is the signal that killed it)."""
    if code is None:
        return "ended"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"ended with exit code {code}"


# Seconds between the SIGTERM of a cancelled attempt's worker and its SIGKILL.
TERM_WAIT = 2.0


class WorkerProcess:
    """The dispatcher's handle on one worker process: its pipe, its cancel flag, its end."""

    def __init__(self, context, settings_module, using):
        self.conn, child_conn = context.Pipe()
        self.cancel = context.Event()
        self.process = context.Process(
            target=child_main,
            args=(child_conn, self.cancel, settings_module, using, os.getpid()),
            name="scheduler-process-slot",
            daemon=True,
        )
        self.process.start()
        child_conn.close()
        self.ready = False  # it said "ready" (Django is set up); slot thread only
        self.job = None  # the attempt it was given; under the executor's lock
        self.aborted = False  # killed by the executor's abort (the attempt is released)
        self._lock = threading.Lock()  # one ending at a time: the group is signalled before the reap only
        self._reaped = False

    @property
    def pid(self):
        return self.process.pid

    def exited(self):
        """Return whether the process ended, without reaping it (so its pid, the group's id, stays taken)."""
        if self._reaped:
            return True
        if not _WAITID:
            return not self.process.is_alive()
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped: multiprocessing reaps ended children when it starts one
            return True

    def end(self, wait=0.0):
        """Give the process ``wait`` seconds to exit by itself, kill its group, reap it; return its exit code.

        The group goes in every case: what the task started outlives the
        worker otherwise (the group outlives its leader).
        """
        with self._lock:
            if not self._reaped:
                self._wait_exit(wait)
                if not lifeline.kill_group(self.pid):  # it has no group yet: it is just starting
                    with contextlib.suppress(OSError):
                        self.process.kill()
                self._wait_exit(5.0)
                # Reading the exit code reaps it. (Not join(): it waits for the pipe
                # multiprocessing watches, which a forked grandchild may hold open.)
                self._reaped = self.process.exitcode is not None
            with contextlib.suppress(OSError):
                self.conn.close()
        return self.process.exitcode

    def _wait_exit(self, seconds):
        limit = time.monotonic() + seconds
        while not self.exited() and time.monotonic() < limit:
            time.sleep(0.005)

    def kill(self):
        """Kill the process and its group now, and reap it."""
        return self.end()

    def terminate(self, wait=TERM_WAIT):
        """Send SIGTERM to the process and its group, give them ``wait`` seconds, then ``end`` (SIGKILL, reap)."""
        with self._lock:
            if self._reaped:
                return self.process.exitcode
            if not lifeline.kill_group(self.pid, signal.SIGTERM):  # no group yet: the process alone
                with contextlib.suppress(OSError):
                    self.process.terminate()
        return self.end(wait=wait)

    def ask_to_exit(self):
        """Tell the idle process to exit (``end`` waits for it)."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)

    def stop(self):
        """Ask the idle process to exit, then end it (and its group) as ``end`` does."""
        self.ask_to_exit()
        return self.end(wait=2.0)
