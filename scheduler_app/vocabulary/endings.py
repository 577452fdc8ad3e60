"""How a task ends its attempt on purpose: ``Snooze`` ("not now") and ``JobCancelled`` ("stopped, as asked").

``Snooze``: "not now, try again in a while", without failing.

    from scheduler_app import Snooze

    @task
    def sync(account_id):
        if provider_busy():
            raise Snooze(600)   # pending again in 10 minutes
        ...

The job goes back to pending at now + seconds; the attempt does not count
against ``max_attempts`` and leaves no ``errors`` entry; the job's
``snoozes`` goes up by one. Past ``SCHEDULER["MAX_SNOOZES"]`` (100) a
snooze fails the attempt instead ("snoozed too often"), so nothing loops
for ever. A task that takes a context may call ``context.snooze(seconds)``.

``JobCancelled``: raised by a task that saw ``context.cancel_requested``,
it ends the job as cancelled.

Pure: no Django (``scheduler_app`` exports both without loading Django).
"""

import math

from .bounds import SNOOZE_MAX


class Snooze(Exception):  # a request, not an error: no "Error" in its name
    """Raise from a task to run its job again ``seconds`` from now, without counting an attempt."""

    def __init__(self, seconds):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise ValueError(f"Snooze takes a number of seconds, not {seconds!r}.")
        if not 0 <= seconds <= SNOOZE_MAX:
            raise ValueError(f"Snooze takes a number of seconds from 0 to {SNOOZE_MAX}, not {seconds!r}.")
        self.seconds = float(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


class JobCancelled(Exception):
    """Raise from a task to end its job as cancelled (after a cancel request)."""
