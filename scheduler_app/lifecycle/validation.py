"""What a valid job is: one rule per field, one wording per rule.

Every entry point hands what it received to these rules and only translates
their ``ValidationError`` (errors keyed by field name) into its own shape:
the API a 400 with field errors, the admin an inline form error, a command
one line and exit code 2, ``task.enqueue()`` an ``InvalidTask``. Entry points
that receive text (a command line, a form) parse it with the same rule's
``parse``, so a typo and an out-of-range value get the same message.
"""

import json
import math
from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError
from django.tasks import Task
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import conf, registry
from ..limits import (
    DELAY_MAX,
    JSON_DEPTH_MAX,
    LATEST,
    MAX_ATTEMPTS_MAX,
    MAX_ATTEMPTS_MIN,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TIMEOUT_MAX,
    UNIQUE_KEY_MAX,
)
from ..models import Job


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


class JSONContainer(Rule):
    """A JSON list (args) or object (kwargs)."""

    def __init__(self, field, kind):
        wanted = "a JSON list of positional arguments" if kind is list else "a JSON object of keyword arguments"
        super().__init__(field, f"Must be {wanted}.")
        self.kind = kind

    def check(self, value):
        if self.kind is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, self.kind):
            self.fail()
        problem = json_problem(value)
        if problem:
            self.fail(problem)
        try:
            # A copy as the database will give it back (tuples become lists).
            return json.loads(json.dumps(value, allow_nan=False))
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


class TaskName(Rule):
    def __init__(self):
        super().__init__("task", "")

    def check(self, value):
        name = registry.name_of(value) if isinstance(value, Task) else value
        try:
            return registry.get(name)
        except registry.UnknownTask as exc:
            self.fail(str(exc))

    def schema(self):
        return {"type": "string", "enum": registry.names()}


class QueueName(Rule):
    def __init__(self):
        super().__init__("queue", "")

    def check(self, value):
        known = conf.known_queues()
        if not isinstance(value, str) or value not in known:
            shown = value if isinstance(value, str) and json_problem(value) is None else "?"
            self.fail(f"Unknown queue '{shown}'. Known queues: {', '.join(sorted(known))}.")
        return value

    def schema(self):
        return {"type": "string", "enum": sorted(conf.known_queues())}


TASK = TaskName()
ARGS = JSONContainer("args", list)
KWARGS = JSONContainer("kwargs", dict)
EXECUTE_AT = Moment("execute_at")
DELAY = Seconds("delay", DELAY_MAX, zero_ok=True)
PRIORITY = WholeNumber("priority", PRIORITY_MIN, PRIORITY_MAX)
QUEUE = QueueName()
MAX_ATTEMPTS = WholeNumber("max_attempts", MAX_ATTEMPTS_MIN, MAX_ATTEMPTS_MAX)
TIMEOUT = Seconds("timeout", TIMEOUT_MAX)
UNIQUE_KEY = Text("unique_key", UNIQUE_KEY_MAX)

RULES = {r.field: r for r in (TASK, ARGS, KWARGS, EXECUTE_AT, DELAY, PRIORITY, QUEUE, MAX_ATTEMPTS, TIMEOUT, UNIQUE_KEY)}
BOTH_WHEN = "Give either execute_at or delay, not both."


def validate_priority(value):
    return PRIORITY.check(value)


def validate_execute_at(value):
    return EXECUTE_AT.check(value)


class _Errors:
    """Collects every field's error, so one request learns all that is wrong with it."""

    def __init__(self):
        self.errors = {}

    def run(self, rule, value):
        try:
            return rule.check(value)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.errors.setdefault(field, []).extend(messages)
            return None

    def add(self, field, message):
        self.errors.setdefault(field, []).append(message)

    def raise_if_any(self):
        if self.errors:
            raise ValidationError(self.errors)


def build_job(
    task,
    args=(),
    kwargs=None,
    *,
    execute_at=None,
    delay=None,
    priority=None,
    queue=None,
    max_attempts=None,
    timeout=None,
    unique_key=None,
    created_by=None,
    schedule=None,
    now=None,
):
    """Validate a job description and return an unsaved Job.

    ``None`` means "the default": now, the task's priority and queue, the
    DEFAULT_MAX_ATTEMPTS setting, no timeout, no unique key. ``delay``
    (seconds from now) is the other way to give ``execute_at``. Raise
    ValidationError with errors keyed by field name.
    """
    errors = _Errors()
    now = now or timezone.now()
    task_obj = errors.run(TASK, task)
    args = errors.run(ARGS, [] if args is None else args)
    kwargs = errors.run(KWARGS, {} if kwargs is None else kwargs)
    if delay is not None:
        if execute_at is not None:
            errors.add("delay", BOTH_WHEN)
        elif errors.run(DELAY, delay) is not None:
            execute_at = now + timedelta(seconds=delay)
    if execute_at is None:
        execute_at = now
    else:
        execute_at = errors.run(EXECUTE_AT, execute_at)
    if priority is None and task_obj is not None:
        priority = task_obj.priority
    if priority is not None:
        errors.run(PRIORITY, priority)
    if queue is None and task_obj is not None:
        queue = task_obj.queue_name
    if queue is not None:
        errors.run(QUEUE, queue)
    if max_attempts is None:
        max_attempts = conf.get("DEFAULT_MAX_ATTEMPTS")
    errors.run(MAX_ATTEMPTS, max_attempts)
    if timeout is not None:
        timeout = errors.run(TIMEOUT, timeout)
    if unique_key == "":
        unique_key = None
    if unique_key is not None:
        errors.run(UNIQUE_KEY, unique_key)
    errors.raise_if_any()
    return Job(
        task=registry.name_of(task_obj),
        args=args,
        kwargs=kwargs,
        queue=queue,
        priority=priority,
        execute_at=execute_at,
        max_attempts=max_attempts,
        timeout=timeout,
        unique_key=unique_key,
        created_by=created_by,
        schedule_id=getattr(schedule, "pk", schedule),
        created_at=now,
        updated_at=now,
    )


def error_text(exc):
    """Return a ValidationError as one line: ``field: message; field: message``."""
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
    return " ".join(exc.messages)
