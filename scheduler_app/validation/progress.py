"""How a job's progress reads as one line of text: the numbers, and the message only where it adds to them.

Tasks often say their numbers twice: ``set_progress(116, 1200, "step 116 of
1200")`` read "116/1200 step 116 of 1200". The rule, for every page (the
admin's list and page, the dashboard, the API's ``progress.text``):

* the numbers read ``116/1200`` (``116`` when the total is unknown,
  ``?/1200`` when only the total is known);
* a message that holds nothing but those numbers (or the percent) and
  filler words ("step", "of", "items", "done", ...) adds nothing: the
  numbers alone;
* a message that already says the numbers in its own words ("row 116 of
  1200") is shown alone;
* any other message follows the numbers: ``116/1200 · importing invoices``.

The stored value is read by ``fields.PROGRESS.shown`` (its rule); this
module only words it.
"""

import re

from .fields import PROGRESS

SEPARATOR = " · "
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# Words that say nothing the numbers do not ("step 116 of 1200", "116/1200 items done").
FILLER = frozenset(
    [
        "step",
        "steps",
        "of",
        "out",
        "item",
        "items",
        "done",
        "complete",
        "completed",
        "processed",
        "progress",
        "percent",
        "total",
        "so",
        "far",
        "is",
        "are",
        "at",
        "now",
    ]
)
_WORD = re.compile(r"[^\W\d_]+")


def number(value):
    """Return a progress number as pages write it: 116, 2.5 (never 116.0, never 1e+06)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) else f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def numbers_text(current, total):
    """Return ``current/total`` as pages write it ('' when neither is known)."""
    if current is None and total is None:
        return ""
    if total is None:
        return number(current)
    return f"{'?' if current is None else number(current)}/{number(total)}"


def _values(current, total, percent):
    return {float(v) for v in (current, total, percent) if v is not None}


def text(shown):
    """Return the one line a progress (``PROGRESS.shown``'s dict) reads as, without repeating itself."""
    if shown is None:
        return ""
    current, total, message = shown["current"], shown["total"], shown["message"].strip()
    numbers = numbers_text(current, total)
    if not message:
        return numbers
    if not numbers:
        return message
    said = [float(n.replace(",", ".")) for n in _NUMBER.findall(message)]
    known = _values(current, total, shown["percent"])
    words = [w for w in _WORD.findall(message.lower()) if w not in FILLER]
    if not words and set(said) <= known:
        return numbers  # "step 116 of 1200": nothing beyond the numbers
    if current is not None and float(current) in said and (total is None or float(total) in said):
        return message  # "row 116 of 1200": the numbers, in the task's own words
    return f"{numbers}{SEPARATOR}{message}"


def shown(stored):
    """Return ``PROGRESS.shown(stored)`` with its ``text`` (this module's rule), or None when there is none."""
    progress = PROGRESS.shown(stored)
    if progress is not None:
        progress["text"] = text(progress)
    return progress
