"""``rundispatcher --processes N``: one supervisor, N dispatcher processes.

Each child is an ordinary dispatcher (its own loop, slots, database
connections and ``Worker`` row), started as ``python -m django rundispatcher
...`` with the same options. The supervisor only watches them:

* a child that dies is restarted, after a backoff that doubles while it
  keeps dying early (1 s up to 30 s; back to 1 s once a child has lived a
  minute), and the supervisor logs its exit status;
* the first SIGTERM/SIGINT is passed on to every child once (each stops
  gracefully: ``--grace`` applies to all); the supervisor exits 0 when all
  have stopped. A second signal is passed on too, and the children exit at
  once, as a lone dispatcher does;
* children run in their own sessions, so a Ctrl-C in a terminal reaches
  only the supervisor (which passes it on once), and on Linux a child is
  sent SIGTERM if the supervisor itself dies.

Pure: no Django. The command builds the child's command line.
"""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from .lifeline import parent_death_signal

logger = logging.getLogger(__name__)

RESTART_BACKOFF_MIN = 1.0
RESTART_BACKOFF_MAX = 30.0
# A child that lived this long was healthy: its next restart waits the minimum.
HEALTHY_AFTER = 60.0
POLL = 0.1


def _die_with_parent():
    """Linux: have the kernel send this (child) process SIGTERM when its parent dies (a graceful stop)."""
    parent_death_signal(signal.SIGTERM)


class Child:
    """One dispatcher process and its restart bookkeeping (supervisor thread only)."""

    def __init__(self, number):
        self.number = number
        self.process = None
        self.started = 0.0
        self.backoff = RESTART_BACKOFF_MIN
        self.restart_at = 0.0


class Supervisor:
    def __init__(self, command, count, *, env=None, cwd=None, finite=False, clock=time.monotonic):
        """``finite``: the children end on their own (``--burst``, ``--max-jobs``), so one
        that exits with 0 is done, not restarted; the supervisor returns when all are."""
        self.command = list(command)
        self.children = [Child(n) for n in range(1, count + 1)]
        self.env = env
        self.cwd = cwd
        self.finite = finite
        self.clock = clock
        self.signals = 0  # any thread (the signal handler) increments it
        self._wake = threading.Event()

    # -- called from the signal handler -------------------------------------

    def signal(self):
        """Count a stop signal: the first stops gracefully, the second at once."""
        self.signals += 1
        self._wake.set()

    # -- the loop --------------------------------------------------------------

    def pids(self):
        return [c.process.pid for c in self.children if c.process is not None]

    def _start(self, child):
        child.process = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        child.started = self.clock()

    def start(self):
        for child in self.children:
            self._start(child)

    def run(self):
        """Watch the children until they have all stopped; return 0."""
        passed_on = 0
        while True:
            if self.signals > passed_on:
                passed_on = self.signals
                self._pass_on(signal.SIGTERM)
            alive = self._reap(restart=passed_on == 0)
            if (passed_on or self.finite) and not alive:
                return 0
            self._wake.wait(POLL)
            self._wake.clear()

    def _pass_on(self, signum):
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(signum)

    def _reap(self, *, restart):
        """Notice children that exited; restart them when ``restart``. Return how many run."""
        now = self.clock()
        alive = 0
        for child in self.children:
            process = child.process
            if process is not None:
                code = process.poll()
                if code is None:
                    alive += 1
                    continue
                lived = now - child.started
                child.backoff = RESTART_BACKOFF_MIN if lived >= HEALTHY_AFTER else child.backoff
                if self.finite and code == 0:
                    child.process = None
                    child.restart_at = float("inf")  # done
                    continue
                if restart:
                    child.restart_at = now + child.backoff
                    logger.warning(
                        "dispatcher process %d (pid %d) exited with %s after %.1fs; restarting in %.1fs",
                        child.number,
                        process.pid,
                        _status(code),
                        lived,
                        child.backoff,
                        extra={"action": "child_exit"},
                    )
                    child.backoff = min(child.backoff * 2, RESTART_BACKOFF_MAX)
                else:
                    logger.info(
                        "dispatcher process %d (pid %d) stopped with %s", child.number, process.pid, _status(code)
                    )
                child.process = None
            if restart and child.process is None and now >= child.restart_at:
                self._start(child)
                alive += 1
        return alive


def _status(code):
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


@contextlib.contextmanager
def supervisor_signals(supervisor, signals=(signal.SIGTERM, signal.SIGINT)):
    """Count SIGTERM/SIGINT for the supervisor (it passes them on); restore the old handlers after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        supervisor.signal()

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def child_command(options, *, python=None):
    """Return the command line of one child: ``rundispatcher`` with ``options`` (no --processes)."""
    return [python or sys.executable, "-m", "django", "rundispatcher", "--supervised", *options]


def child_env(settings_module):
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    return env
