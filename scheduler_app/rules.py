"""Rules: one field's rule, one wording per failure, text parsing included.

The rule classes, and the rules of a job's plain fields (the ones that need
no registry: ``lifecycle.validation`` adds the task and the queue, and
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

from . import storable
from .limits import (
    CONCURRENCY_LIMIT_MAX,
    DELAY_MAX,
    DEPENDENCIES_MAX,
    JSON_DEPTH_MAX,
    LATEST,
    MAX_ATTEMPTS_MAX,
    MAX_ATTEMPTS_MIN,
    PRIORITY_MAX,
    PRIORITY_MIN,
    RATE_LIMIT_MAX,
    RATE_PERIOD_MAX,
    TIMEOUT_MAX,
    UNIQUE_FOR_MAX,
    UNIQUE_KEY_MAX,
)

# Largest value of a 64-bit primary key.
ID_MAX = 2**63 - 1


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
    """A number of seconds in ``(0, high]`` (or ``[0, high]`` with ``zero_ok``)."""

    def __init__(self, field, high, *, zero_ok=False):
        wording = f"from 0 to {high}" if zero_ok else f"greater than 0 and at most {high}"
        super().__init__(field, f"Must be a number of seconds {wording}.")
        self.high, self.zero_ok = high, zero_ok

    def check(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail()
        if not math.isfinite(value) or value > self.high or value < 0 or (value == 0 and not self.zero_ok):
            self.fail()
        return float(value)

    def parse(self, text):
        try:
            value = float(str(text).strip())
        except ValueError:
            self.fail()
        return self.check(value)

    def schema(self):
        # OpenAPI 3.0: exclusiveMinimum is a flag on minimum.
        low = {"minimum": 0} if self.zero_ok else {"minimum": 0, "exclusiveMinimum": True}
        return {"type": "number", **low, "maximum": self.high}


class Moment(Rule):
    """An aware date and time no later than ``limits.LATEST``; ``check`` returns it in UTC.

    In UTC because Python allows offsets up to 24 hours and PostgreSQL only
    up to 16 (``+19:55`` was a DataError: a 500), and an offset can push
    year 1 or 9999 out of what either can hold.
    """

    naive = "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00)."
    too_late = "Must be no later than 9999-12-31T23:59:59Z."
    too_early = "Must be no earlier than 0001-01-01T00:00:00Z."
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


# JSON schema (ECMA 262) of text without NUL characters, which no database stores.
NO_NUL = "^[^\\u0000]*$"


def json_problem(value, *, max_depth=JSON_DEPTH_MAX):
    """Return why ``value`` cannot be stored as JSON text, or None.

    Catches what JSON parsers let through but the databases refuse (NUL
    characters in PostgreSQL's jsonb, lone surrogates in UTF-8), values that
    are not JSON (objects, NaN), and nesting deep enough to exhaust the
    recursion limit of whatever reads the document later.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"Nested more than {max_depth} levels deep."
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return "Object keys must be text."
                stack.append((key, depth))
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "Text may not contain NUL (\\u0000) characters."
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "Text may not contain lone surrogate characters."
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "Numbers must be finite (no NaN or Infinity)."
        elif item is None or isinstance(item, (bool, int)):
            pass
        else:
            return f"Must be JSON: {type(item).__name__} values cannot be stored."
    return None


# Built once: json.dumps with options builds an encoder per call (on every enqueue's path).
# One measure of a value's size, for arguments and results alike (``storable``).
json_text = storable.compact_json
json_size = storable.json_size
_bytes = storable.text_size


class JSONContainer(Rule):
    """A JSON list (args) or object (kwargs)."""

    def __init__(self, field, kind):
        wanted = "a JSON list of positional arguments" if kind is list else "a JSON object of keyword arguments"
        super().__init__(field, f"Must be {wanted}.")
        self.kind = kind

    def check(self, value):
        return self.sized(value)[0]

    def sized(self, value):
        """Return ``(value, size)``: the checked value, and its ``json_size`` (``build_job`` bounds it)."""
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
            text = json_text(value)
            return json.loads(text), _bytes(text)
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
        numbers = []
        for item in value:
            item = getattr(item, "pk", item)
            if isinstance(item, bool) or not isinstance(item, int) or not self.low <= item <= self.high:
                self.fail()
            if item not in numbers:
                numbers.append(item)
        return numbers

    def parse(self, text):
        try:
            value = [int(part) for part in str(text).replace(",", " ").split()]
        except ValueError:
            self.fail()
        return self.check(value)

    def schema(self):
        item = {"type": "integer", "minimum": self.low, "maximum": self.high}
        return {"type": "array", "items": item, "maxItems": self.max_items}


# The rules of a job's plain fields (``lifecycle.validation`` adds TASK and QUEUE).
ARGS = JSONContainer("args", list)
KWARGS = JSONContainer("kwargs", dict)
EXECUTE_AT = Moment("execute_at")
DELAY = Seconds("delay", DELAY_MAX, zero_ok=True)
PRIORITY = WholeNumber("priority", PRIORITY_MIN, PRIORITY_MAX)
MAX_ATTEMPTS = WholeNumber("max_attempts", MAX_ATTEMPTS_MIN, MAX_ATTEMPTS_MAX)
TIMEOUT = Seconds("timeout", TIMEOUT_MAX)
BACKOFF = Seconds("backoff", TIMEOUT_MAX, zero_ok=True)
UNIQUE_KEY = Text("unique_key", UNIQUE_KEY_MAX)
UNIQUE_FOR = Seconds("unique_for", UNIQUE_FOR_MAX)
DEPENDS_ON = WholeNumbers("depends_on", "job ids", 1, ID_MAX, DEPENDENCIES_MAX)
DEPENDS_ON_INDEX = WholeNumbers("depends_on_index", "indexes of jobs of this request", 0, ID_MAX, DEPENDENCIES_MAX)
ON_DEPENDENCY_FAILURE = Choice("on_dependency_failure", ("cancel", "run"))

# A queue's limits (``lifecycle.queues``; the admin, PATCH /api/queues/{name}/, SCHEDULER["QUEUES"]).
CONCURRENCY_LIMIT = WholeNumber("concurrency_limit", 1, CONCURRENCY_LIMIT_MAX)
RATE_LIMIT = WholeNumber("rate_limit", 1, RATE_LIMIT_MAX)
RATE_PERIOD = Seconds("rate_period", RATE_PERIOD_MAX)
