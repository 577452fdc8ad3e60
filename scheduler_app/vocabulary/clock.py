"""Clocks: the only place the dispatcher core reads the time."""

import threading
import time


class SystemClock:
    """Wall-clock time for what is stored, monotonic time for waiting."""

    def time(self):
        return time.time()

    def monotonic(self):
        return time.monotonic()


class FakeClock:
    """A clock tests move by hand; both readings advance together."""

    def __init__(self, start=1_800_000_000.0):
        self._now = float(start)
        self._lock = threading.Lock()

    def time(self):
        with self._lock:
            return self._now

    def monotonic(self):
        return self.time()

    def advance(self, seconds):
        with self._lock:
            self._now += seconds
            return self._now
