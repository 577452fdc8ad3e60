"""A dispatcher's guardian: a small process that kills the dispatcher before its leases expire unrenewed.

Once an attempt's lease expires, another dispatcher may rescue the job and
start it again (invariant 6). The dispatcher stops its attempts first
(``dispatcher.leases.LeaseWatch``): a worker process is killed, a thread gets
its cancel flag. But a thread cannot be killed, and a dispatcher that is
paused (SIGSTOP, a stopped container, a debugger) or stuck cannot stop
anything: its threads would run on beside the rescued run. So each
``rundispatcher`` starts a guardian, a separate process that only waits:
the dispatcher tells it, whenever the earliest lease of its attempts in
flight moves, the moment (on the shared monotonic clock) by which that
lease must have been renewed; if that moment comes and the dispatcher has
not moved it or said it runs nothing, the guardian kills the dispatcher
with SIGKILL (a paused process too), and with it its threads; its worker
processes follow (``lifeline``). The guardian ends when the dispatcher
does (its pipe closes).

Protocol, one line each on the guardian's standard input: a float (the
moment, ``time.monotonic()``), or ``-`` (nothing in flight: disarmed).

Pure: the standard library only; run as a script so it starts in
milliseconds without Django.
"""

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import time

logger = logging.getLogger(__name__)

# Of the lease, what is left when the guardian kills: after the dispatcher's own
# stop (``leases.LEASE_MARGIN``, 0.1), before another dispatcher may rescue.
GUARD_MARGIN = 0.05


def watch(pid, stream, *, clock=time.monotonic, kill=os.kill):
    """Kill ``pid`` when an armed moment read from ``stream`` (a file descriptor) passes; return why it ended."""
    deadline = None
    pending = b""
    while True:
        timeout = None if deadline is None else max(0.0, deadline - clock())
        ready, _, _ = select.select([stream], [], [], timeout)
        if not ready:
            if deadline is not None and clock() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    kill(pid, signal.SIGKILL)
                return "killed"
            continue
        data = os.read(stream, 4096)
        if not data:
            return "closed"  # the dispatcher ended (or closed us)
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            line = line.strip()
            deadline = None if line in (b"-", b"") else float(line)


class Guardian:
    """The dispatcher's side: starts the guardian process and tells it the moments (loop thread only)."""

    def __init__(self, *, margin=GUARD_MARGIN):
        self.margin = margin
        self._sent = None  # the last moment told (None: disarmed)
        self._process = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid())],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-Z of the terminal's group does not stop it
        )

    def lease_until(self, until, lease, *, wall=time.time, monotonic=time.monotonic):
        """Arm for the earliest lease in flight, ``until`` (epoch seconds), or disarm (None)."""
        moment = None if until is None else monotonic() + (until - lease * self.margin - wall())
        if moment == self._sent or (moment is not None and self._sent is not None and abs(moment - self._sent) < 1e-3):
            return
        self._send(b"-\n" if moment is None else f"{moment!r}\n".encode())
        self._sent = moment

    def _send(self, line):
        try:
            self._process.stdin.write(line)
            self._process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            logger.warning("the dispatcher's guardian process is gone: leases are guarded by the dispatcher alone")

    def close(self):
        """End the guardian (disarmed first: the dispatcher is stopping on its own)."""
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            self._process.stdin.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()


if __name__ == "__main__":
    ended = watch(int(sys.argv[1]), sys.stdin.fileno())
    if ended == "killed":
        sys.stderr.write(
            f"scheduler guardian: dispatcher {sys.argv[1]} did not renew its leases in time (paused or stuck?): "
            "killed it, so that no attempt of it runs beside its rescue\n"
        )
