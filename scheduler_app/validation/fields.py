"""Rules: one field's rule, one wording per failure, text parsing included.

The rule classes, and the rules of a job's plain fields (the ones that need
no registry: ``lifecycle.building`` adds the task and the queue, and
builds the job). Schedules and settings build theirs from the same classes.
Each ``check(value)`` returns the value (normalised) or raises Django's
ValidationError keyed by the field; ``parse(text)`` is for entry points that
receive text (a command line, a form box); ``schema()`` is the JSON schema
the API declares for the field.
"""

import json
import math
from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..vocabulary import storable
from ..vocabulary.bounds import (
    CONCURRENCY_LIMIT_MAX,
    DELAY_MAX,
    DEPENDENCIES_MAX,
    EARLIEST,
    JSON_DEPTH_MAX,
    LATEST,
    MAX_ATTEMPTS_MAX,
    MAX_ATTEMPTS_MIN,
    PRIORITY_MAX,
    PRIORITY_MIN,
    PROGRESS_MESSAGE_MAX,
    PROGRESS_NUMBER_MAX,
    RATE_LIMIT_MAX,
    RATE_PERIOD_MAX,
    SECONDS_MIN,
    TIMEOUT_MAX,
    UNIQUE_FOR_MAX,
    UNIQUE_KEY_MAX,
)
from ..vocabulary.storable import clean_text
from . import durations
from .jsonvalues import NO_NUL, json_problem  # the rules below use them; other modules import them here

# Largest value of a 64-bit primary key.
ID_MAX = 2**63 - 1


# An error message quotes at most this many characters of a value it was given.
SHOWN_MAX = 100


def shown(value):
    """Return a user's value as an error message may quote it.

    ``repr`` escapes what must never reach an HTML page or a JSON document
    (lone surrogates cannot be encoded, control characters hide text), and a
    long value is cut: ``'os.system'``, ``'\\ud800'``, ``'\\x1b[31m'``.
    """
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 1] + "…"


def _fail(field, message):
    raise ValidationError({field: [message]})


class Rule:
    """A field's rule: ``check(value)`` for values from code and JSON, ``parse(text)`` for text."""

    def __init__(self, field, message):
        self.field = field
        self.message = message

    def fail(self, message=None):
        _fail(self.field, message or self.message)

    def check(self, value):
        raise NotImplementedError

    def parse(self, text):
        return self.check(text)

    def schema(self):
        """Return the JSON schema of a valid value (the API's schema quotes it)."""
        return {}


class WholeNumber(Rule):
    def __init__(self, field, low, high):
        super().__init__(field, f"Must be a whole number from {low} to {high}.")
        self.low, self.high = low, high

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            self.fail()
        return value

    def parse(self, text):
        try:
            value = int(str(text).strip())
        except ValueError:
            self.fail()
        return self.check(value)

    def schema(self):
        return {"type": "integer", "minimum": self.low, "maximum": self.high}


class Seconds(Rule):
    """A number of seconds from ``bounds.SECONDS_MIN`` to ``high`` (or 0 too, with ``zero_ok``).

    A positive value under a millisecond is refused: added to a time it
    rounds to nothing (5e-324), and a period, timeout or lease of nothing
    is not one.
    """

    def __init__(self, field, high, *, zero_ok=False):
        wording = f"from 0 to {high}" if zero_ok else f"from {SECONDS_MIN:g} to {high}"
        super().__init__(field, f"Must be a number of seconds {wording}.")
        self.high, self.zero_ok = high, zero_ok
        self.low = 0 if zero_ok else SECONDS_MIN

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail()
        if not math.isfinite(value) or not self.low <= value <= self.high:
            self.fail()
        return float(value)

    def parse(self, text):
        try:
            value = float(str(text).strip())
        except ValueError:
            self.fail()
        return self.check(value)

    def schema(self):
        return {"type": "number", "minimum": self.low, "maximum": self.high}


class Duration(Seconds):
    """A ``Seconds`` rule that also reads durations people type: ``"90"``, ``"90s"``, ``"2h"``, ``"3d"``, ``"1h30m"``.

    The one duration rule (``durations.seconds_of``, pytimeparse2), bounded
    as seconds are; ``check`` takes text too, since JSON bodies,
    ``enqueue(delay="2h")`` and ``@options(unique_for="1d")`` carry it.
    """

    def __init__(self, field, high, *, zero_ok=False):
        super().__init__(field, high, zero_ok=zero_ok)
        self.message = durations.wording(self.low, high)

    def check(self, value):
        seconds = durations.seconds_of(value)
        if seconds is None or not self.low <= seconds <= self.high:
            self.fail()
        return seconds

    def parse(self, text):
        return self.check(str(text))

    def schema(self):
        number = super().schema()
        text = {"type": "string", "example": "1h30m", "description": f"seconds as text, or {durations.FORMS}"}
        return {"oneOf": [number, text]}


def _utc_text(moment):
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


EARLIEST_TEXT, LATEST_TEXT = _utc_text(EARLIEST), _utc_text(LATEST)


class Moment(Rule):
    """An aware date and time from ``bounds.EARLIEST`` to ``bounds.LATEST``; ``check`` returns it in UTC.

    In UTC because Python allows offsets up to 24 hours and PostgreSQL only
    up to 16 (``+19:55`` was a DataError: a 500), and an offset can push
    year 1 or 9999 out of what either can hold. The bounds are a day inside
    Python's: a time shown in any TIME_ZONE is still a date Python holds
    (9999-12-31T23:59:59Z was year 10000 in Asia/Tokyo, and every page
    that showed the job a 500).
    """

    naive = "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00)."
    too_late = f"Must be no later than {LATEST_TEXT}."
    too_early = f"Must be no earlier than {EARLIEST_TEXT}."
    invalid = "Must be an ISO 8601 date and time with a time zone offset (e.g. 2026-01-01T09:00:00+00:00)."

    def __init__(self, field):
        super().__init__(field, self.invalid)

    def check(self, value):
        if not isinstance(value, datetime):
            self.fail()
        if timezone.is_naive(value):
            self.fail(self.naive)
        try:
            value = value.astimezone(UTC)
        except OverflowError:  # an offset that pushes year 1 or 9999 past the ends of time
            self.fail(self.too_late if value.year == datetime.max.year else self.too_early)
        if value > LATEST:
            self.fail(self.too_late)
        if value < EARLIEST:
            self.fail(self.too_early)
        return value

    def parse(self, text):
        try:
            value = parse_datetime(str(text).strip())
        except ValueError:
            value = None
        if value is None:
            self.fail()
        return self.check(value)

    def schema(self):
        return {"type": "string", "format": "date-time"}


class Text(Rule):
    def __init__(self, field, max_length):
        super().__init__(field, f"Must be text of at most {max_length} characters.")
        self.max_length = max_length

    def check(self, value):
        if not isinstance(value, str) or len(value) > self.max_length:
            self.fail()
        problem = json_problem(value)
        if problem:
            self.fail(problem)
        return value

    def schema(self):
        return {"type": "string", "maxLength": self.max_length, "pattern": NO_NUL}


class JSONContainer(Rule):
    """A JSON list (args) or object (kwargs)."""

    def __init__(self, field, kind):
        wanted = "a JSON list of positional arguments" if kind is list else "a JSON object of keyword arguments"
        super().__init__(field, f"Must be {wanted}.")
        self.kind = kind

    def check(self, value):
        return self.sized(value)[0]

    def sized(self, value):
        """Return ``(value, size)``: the checked value, and its ``storable.json_size`` (``build_job`` bounds it)."""
        if self.kind is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, self.kind):
            self.fail()
        if not value:
            # The copy below, without the round trip (no arguments: most jobs' kwargs).
            return self.kind(), 2
        problem = json_problem(value)
        if problem:
            self.fail(problem)
        try:
            # A copy as the database will give it back (tuples become lists).
            text = storable.compact_json(value)
            return json.loads(text), storable.text_size(text)
        except (TypeError, ValueError, RecursionError) as exc:  # huge integers, for one
            self.fail(f"Must be JSON: {exc}.")

    def parse(self, text):
        try:
            value = json.loads(str(text))
        except RecursionError:
            self.fail(f"Nested more than {JSON_DEPTH_MAX} levels deep.")
        except ValueError as exc:
            self.fail(f"Not valid JSON: {exc}.")
        return self.check(value)

    def schema(self):
        if self.kind is list:
            return {"type": "array", "items": {}}
        return {"type": "object", "additionalProperties": {}}


class Choice(Rule):
    """One of a few words."""

    def __init__(self, field, choices):
        words = [f'"{c}"' for c in choices]
        super().__init__(field, f"Must be {', '.join(words[:-1])} or {words[-1]}.")
        self.choices = tuple(choices)

    def check(self, value):
        if not isinstance(value, str) or value not in self.choices:
            self.fail()
        return value

    def schema(self):
        return {"type": "string", "enum": list(self.choices)}


class WholeNumbers(Rule):
    """A list of up to ``max_items`` whole numbers from ``low`` to ``high``, duplicates dropped, order kept.

    Values from code may be objects with an integer ``pk`` (a Job).
    """

    def __init__(self, field, what, low, high, max_items):
        super().__init__(field, f"Must be a list of at most {max_items} {what}.")
        self.low, self.high, self.max_items = low, high, max_items

    def check(self, value):
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list) or len(value) > self.max_items:
            self.fail()
        numbers = {}  # a dict keeps the order; a list's ``in`` made a 1,000-item list cost 0.5 M comparisons
        for item in value:
            item = getattr(item, "pk", item)
            if isinstance(item, bool) or not isinstance(item, int) or not self.low <= item <= self.high:
                self.fail()
            numbers[item] = None
        return list(numbers)

    def parse(self, text):
        try:
            value = [int(part) for part in str(text).replace(",", " ").split()]
        except ValueError:
            self.fail()
        return self.check(value)

    def schema(self):
        item = {"type": "integer", "minimum": self.low, "maximum": self.high}
        return {"type": "array", "items": item, "maxItems": self.max_items}


class Progress:
    """A task's progress report: what ``context.set_progress()`` accepts, and how a stored one is shown.

    ``current`` and ``total`` are numbers (int or float, not bool) from 0 to
    ``bounds.PROGRESS_NUMBER_MAX``, or None (a total of None: unknown);
    total is at least current when both are given. ``message`` is text of at
    most ``bounds.PROGRESS_MESSAGE_MAX`` characters. Numeric text ("3") is
    refused, not read as a number: the task's author sees the mistake.
    """

    def check(self, current, total=None, message=""):
        """Return the report to store; raise TypeError or ValueError that says what is wrong."""
        for name, value in (("current", current), ("total", total)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(
                    f"set_progress(): {name} must be a number or None, not {type(value).__name__} {_cut(value)}."
                )
            if not _progress_number(value):
                raise ValueError(
                    f"set_progress(): {name} must be a number from 0 to {PROGRESS_NUMBER_MAX}, not {_cut(value)}."
                )
        if current is not None and total is not None and total < current:
            raise ValueError(f"set_progress(): total ({_cut(total)}) must be at least current ({_cut(current)}).")
        if not isinstance(message, str):
            raise TypeError(f"set_progress(): message must be text, not {type(message).__name__}.")
        if len(message) > PROGRESS_MESSAGE_MAX:
            raise ValueError(
                f"set_progress(): message must be at most {PROGRESS_MESSAGE_MAX} characters, not {len(message)}."
            )
        return {"current": current, "total": total, "message": clean_text(message)}

    def shown(self, stored):
        """Return a stored progress as pages show it, or None when there is none.

        ``{"current", "total", "message", "updated_at", "percent"}``. The row
        may hold anything (written around the service, or before this rule):
        a number that breaks the rule is None, a message that is not text is
        "" (a long one is cut), ``updated_at`` is an aware datetime or None,
        and ``percent`` (0 to 100) is None unless both numbers are known and
        the total is not 0.
        """
        if not isinstance(stored, dict):
            return None
        current, total = (v if _progress_number(v) else None for v in (stored.get("current"), stored.get("total")))
        message = stored.get("message")
        message = clean_text(message[:PROGRESS_MESSAGE_MAX]) if isinstance(message, str) else ""
        percent = None
        if current is not None and total:
            percent = min(round(100 * current / total), 100)
        return {
            "current": current,
            "total": total,
            "message": message,
            "updated_at": _reported(stored.get("updated_at")),
            "percent": percent,
        }


def _cut(value):
    """Return ``value``'s repr, cut to 40 characters (an int too long to write at all is described)."""
    try:
        return f"{value!r:.40}"
    except ValueError:  # past Python's digit limit for int -> str
        return "a number too long to write"


def _progress_number(value):
    # NaN and infinities fail the comparison; so does an int too large for a float.
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= PROGRESS_NUMBER_MAX


def _reported(text):
    try:
        moment = parse_datetime(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


PROGRESS = Progress()

# The rules of a job's plain fields (``lifecycle.building`` adds TASK and QUEUE).
ARGS = JSONContainer("args", list)
KWARGS = JSONContainer("kwargs", dict)
EXECUTE_AT = Moment("execute_at")
DELAY = Duration("delay", DELAY_MAX, zero_ok=True)
PRIORITY = WholeNumber("priority", PRIORITY_MIN, PRIORITY_MAX)
MAX_ATTEMPTS = WholeNumber("max_attempts", MAX_ATTEMPTS_MIN, MAX_ATTEMPTS_MAX)
TIMEOUT = Duration("timeout", TIMEOUT_MAX)
BACKOFF = Seconds("backoff", TIMEOUT_MAX, zero_ok=True)
UNIQUE_KEY = Text("unique_key", UNIQUE_KEY_MAX)
UNIQUE_FOR = Duration("unique_for", UNIQUE_FOR_MAX)
DEPENDS_ON = WholeNumbers("depends_on", "job ids", 1, ID_MAX, DEPENDENCIES_MAX)
DEPENDS_ON_INDEX = WholeNumbers("depends_on_index", "indexes of jobs of this request", 0, ID_MAX, DEPENDENCIES_MAX)
ON_DEPENDENCY_FAILURE = Choice("on_dependency_failure", ("cancel", "run"))

# A queue's limits (``lifecycle.queues``; the admin, PATCH /api/queues/{name}/, SCHEDULER["QUEUES"]).
CONCURRENCY_LIMIT = WholeNumber("concurrency_limit", 1, CONCURRENCY_LIMIT_MAX)
RATE_LIMIT = WholeNumber("rate_limit", 1, RATE_LIMIT_MAX)
RATE_PERIOD = Duration("rate_period", RATE_PERIOD_MAX)
