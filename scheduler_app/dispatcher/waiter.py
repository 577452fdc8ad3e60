"""The loop's wake-up when it listens itself: an Event that also watches one socket.

With a ``threading.Event`` a NOTIFY took two thread wake-ups to reach the
loop: the kernel woke the listener thread, which decoded the payload and
set the Event, which woke the loop (docs/BENCHMARKS.md: "Where a pickup's
milliseconds go"). Here the
loop thread waits in ``select()`` on a self-pipe *and* on the LISTEN
connection's socket, and reads the notifications itself: one wake-up.

``Waiter`` keeps the Event's interface for the rest of the dispatcher:
``set()`` from any thread (a worker finishing, ``stop()``, an in-process
change signal); ``clear()``, ``is_set()`` and ``wait(timeout)`` from the
loop thread only. A *source* (``listener.LoopListener``) supplies the
socket: ``fileno()`` (None while disconnected), ``read()`` (deliver what
arrived), and ``before_wait(timeout)`` (reconnect when due; return the
timeout shortened to the next reconnect attempt).
"""

import os
import select
import threading


class Waiter:
    def __init__(self, source=None):
        self.source = source
        self._flag = False
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        # Held while writing the pipe and while closing it: a late set()
        # (an abandoned worker thread returning after the loop ended) must
        # never write to a closed, possibly reused, descriptor.
        self._lock = threading.Lock()
        self._closed = False

    # -- any thread ----------------------------------------------------------

    def set(self):
        if self._flag:
            return  # the loop is awake or will not sleep before looking
        self._flag = True
        with self._lock:
            if not self._closed:
                try:
                    os.write(self._write_fd, b"\0")
                except BlockingIOError:  # the pipe is full: the loop is awake anyway
                    pass

    def is_set(self):
        return self._flag

    # -- the loop thread -----------------------------------------------------

    def clear(self):
        if not self._flag:
            return
        # Flag first, then drain: a set() in between leaves the flag up, so
        # wait() returns at once even though its byte was drained.
        self._flag = False
        try:
            while os.read(self._read_fd, 512):
                pass
        except BlockingIOError:
            pass

    def wait(self, timeout):
        """Sleep until set(), data on the source's socket, or ``timeout`` seconds; return is_set()."""
        if self._flag:
            return True
        source = self.source
        fds = [self._read_fd]
        if source is not None:
            timeout = source.before_wait(timeout)
            fd = source.fileno()
            if fd is not None:
                fds.append(fd)
        if timeout is not None:
            timeout = max(0.0, timeout)
        # select(), not poll()/epoll(): their timeouts are whole milliseconds
        # (rounded up), select's microseconds: the loop sleeps until a job's
        # due time, and a millisecond of rounding would be a millisecond late.
        try:
            ready, _, _ = select.select(fds, [], [], timeout)
        except ValueError:  # a descriptor past FD_SETSIZE (a process with >1024 open files)
            ready = _poll(fds, timeout)
        if len(fds) > 1 and fds[1] in ready:
            source.read()  # delivers WakeUps: notify() sets the flag
        return self._flag

    def poll_source(self):
        """Read what the source has without sleeping (a tick driven from outside the loop's wait)."""
        source = self.source
        if source is not None and source.fileno() is not None:
            source.read()

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._read_fd)
            os.close(self._write_fd)


def _poll(fds, timeout):
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    ms = None if timeout is None else int(timeout * 1000 + 0.999)  # rounded up: never early
    return [fd for fd, _ in poller.poll(ms)]
