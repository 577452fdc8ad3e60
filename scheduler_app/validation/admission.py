"""When and how many of a job may start: its concurrency key and limit, its expiry.

One place for these rules, used by every entry point: ``build_job`` (so the
API, the admin, ``enqueue()``, the command and the tasks backend) and
``@options`` (checked at import time):

- ``concurrency_key``: text of at most ``bounds.CONCURRENCY_KEY_MAX``
  characters; at most ``concurrency_limit`` (a whole number, default 1) jobs
  with one key run at once, across every dispatcher. In ``@options`` the key
  is a format string over the task's bound arguments
  (``"account:{account_id}"``): :func:`key_template_problem` checks it
  against the task's signature at import, :func:`render_key` fills it per job.
- ``expires_in`` (seconds, or a duration such as ``"2h"``) or ``expires_at``
  (an aware time): a job not started by then never starts. Both at once is
  an error.
"""

import inspect
import string
from datetime import timedelta

from ..vocabulary.bounds import CONCURRENCY_KEY_MAX, DELAY_MAX
from .fields import CONCURRENCY_LIMIT, Duration, Moment, Rule, Text

CONCURRENCY_KEY = Text("concurrency_key", CONCURRENCY_KEY_MAX)
# The job's limit has the wording and bounds of a queue's (validation.fields).
JOB_CONCURRENCY_LIMIT = CONCURRENCY_LIMIT
EXPIRES_AT = Moment("expires_at")
BOTH_EXPIRY = "Give either expires_in or expires_at, not both."
KEY_WITHOUT_LIMIT = "concurrency_limit needs a concurrency_key."


EXPIRES_IN = Duration("expires_in", DELAY_MAX)


def expiry(errors, expires_in, expires_at, now):
    """Return when a job expires (or None), from ``expires_in`` seconds after ``now`` or ``expires_at``.

    Errors go into ``errors`` (``validation.errors.Errors``), keyed by field.
    """
    if expires_in is not None and expires_at is not None:
        errors.add("expires_in", BOTH_EXPIRY)
        return None
    if expires_in is not None:
        seconds = errors.run(EXPIRES_IN, expires_in)
        return None if seconds is None else now + timedelta(seconds=seconds)
    if expires_at is not None:
        return errors.run(EXPIRES_AT, expires_at)
    return None


class KeyTemplate(Rule):
    """A concurrency key's format string: named fields only, each a parameter of the task."""

    def __init__(self):
        super().__init__("concurrency_key", "Must be a format string such as 'account:{account_id}'.")

    def fields(self, template):
        """Return the names the template reads (``{name}``, ``{name.attr}``, ``{name[0]}``); fail on anything else."""
        if not isinstance(template, str) or not template or len(template) > CONCURRENCY_KEY_MAX:
            self.fail(
                f"Must be a format string of 1 to {CONCURRENCY_KEY_MAX} characters, e.g. 'account:{{account_id}}'."
            )
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as exc:
            self.fail(f"Not a valid format string ({exc}): {template!r}.")
        names = []
        for _, name, _, _ in parsed:
            if name is None:
                continue
            base = name.split(".", 1)[0].split("[", 1)[0]
            if not base or base.isdigit():
                self.fail(f"Use the arguments' names, not positions: {template!r}.")
            names.append(base)
        return names

    def check(self, value):
        self.fields(value)
        return value


KEY_TEMPLATE = KeyTemplate()


def key_template_problem(template, func):
    """Return why ``template`` cannot make a key from ``func``'s arguments, or None."""
    try:
        names = KEY_TEMPLATE.fields(template)
    except Exception as exc:  # noqa: BLE001 - ValidationError: its message
        return " ".join(getattr(exc, "messages", [str(exc)]))
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return None
    unknown = [n for n in names if n not in parameters]
    if unknown:
        return f"{template!r} names {', '.join(unknown)}, not a parameter of {getattr(func, '__name__', func)}."
    return None


def render_key(template, func, args, kwargs, *, takes_context=False):
    """Return the key ``template`` makes from a call's arguments (bound to ``func``'s signature, defaults applied).

    Raise ValueError with the reason when it cannot (a missing argument, a
    field that the value does not have).
    """
    signature = inspect.signature(func)
    leading = [None] if takes_context else []
    try:
        bound = signature.bind(*leading, *args, **kwargs)
    except TypeError as exc:
        raise ValueError(f"the arguments do not bind: {exc}") from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            values = {**values.pop(parameter.name, {}), **values}
    try:
        return template.format_map(values)
    except (KeyError, AttributeError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"{template!r} could not be filled: {type(exc).__name__}: {exc}") from None
