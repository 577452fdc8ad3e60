"""Durations as people type them: ``90``, ``1.5``, ``"90s"``, ``"2h"``, ``"3d"``, ``"1h30m"``.

One reading of a duration for every entry point that takes one (the API's
``delay``, ``enqueue --in``, ``unique_for``, ``timeout``, ``Snooze``, the
admin's boxes): ``fields.Duration`` is the rule, ``Snooze`` raises
``ValueError`` with the same wording. Text that is a plain number is read as
seconds first (``"5e-324"`` stays what it says: pytimeparse2 would round it
to 0); anything else goes to pytimeparse2, the project's duration library.

No Django here: ``from scheduler_app import Snooze`` must not load it.
"""

import math
from datetime import timedelta

import pytimeparse2

from ..vocabulary.bounds import SNOOZE_MAX

# What a duration may look like, as every error message says it.
FORMS = "a duration such as 90s, 2h, 3d or 1h30m"


def seconds_of(value):
    """Return ``value`` (int, float, text or a timedelta) as a finite float of seconds, or None when it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                value = pytimeparse2.parse(text, raise_exception=True)
            except Exception:  # noqa: BLE001 - text the parser cannot read, or a length past what it computes (1e20)
                return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return value if math.isfinite(value) else None


def wording(low, high):
    """Return the message of a duration out of ``low``..``high`` seconds, or unreadable."""
    return f"Must be a number of seconds from {low:g} to {high}, or {FORMS}."


class Snooze(Exception):  # a request, not an error: no "Error" in its name
    """Raise from a task to run its job again ``seconds`` from now, without counting an attempt.

    ``seconds``: a number, or text such as ``"10m"`` or ``"1h30m"``, from 0
    to 100 years; anything else is a ValueError here, in the task.
    """

    def __init__(self, seconds):
        parsed = seconds_of(seconds)
        if parsed is None or not 0 <= parsed <= SNOOZE_MAX:
            raise ValueError(f"Snooze: {wording(0, SNOOZE_MAX)} Not {seconds!r:.60}.")
        self.seconds = parsed
        super().__init__(f"snoozed for {self.seconds:g}s")
