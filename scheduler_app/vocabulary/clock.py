"""Clocks: the only place the dispatcher core reads the time."""

import time


class SystemClock:
    """Wall-clock time for what is stored, monotonic time for waiting."""

    def time(self):
        return time.time()

    def monotonic(self):
        return time.monotonic()
