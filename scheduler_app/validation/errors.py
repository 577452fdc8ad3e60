"""Every field's error of one request, collected: so one request learns all that is wrong with it.

``build_job`` and a schedule's ``clean`` run each field's rule through an
:class:`Errors`; the entry points translate the ValidationError it raises
(errors keyed by field) into their own shape, or into one line with
:func:`error_text`.
"""

from django.core.exceptions import ValidationError


class Errors:
    """Collects every field's error; ``raise_if_any`` raises them together."""

    def __init__(self):
        self.errors = {}

    def run(self, rule, value, how="check"):
        """Return ``rule.<how>(value)``, or None after recording its error."""
        try:
            return getattr(rule, how)(value)
        except ValidationError as exc:
            self.merge(exc, rule.field)
            return None

    def add(self, field, message):
        self.errors.setdefault(field, []).append(message)

    def merge(self, exc, field):
        """Add a ValidationError's messages: by its fields, or under ``field`` when it has none."""
        if hasattr(exc, "error_dict"):
            for name, messages in exc.message_dict.items():
                self.errors.setdefault(name, []).extend(messages)
        else:
            self.errors.setdefault(field, []).extend(exc.messages)

    def raise_if_any(self):
        if self.errors:
            raise ValidationError(self.errors)


# The words a django.tasks caller wrote (``Task.using``, ``@task``, ``step().using``)
# for the job fields whose rules refused them; the others are the same.
TASKS_WORDS = {"execute_at": "run_after", "queue": "queue_name"}
# The fields of a task's arguments: a refusal of either is a TypeError too.
ARGUMENT_FIELDS = frozenset({"args", "kwargs"})


def error_text(exc, words=None):
    """Return a ValidationError as one line: ``field: message; field: message``.

    ``words`` names the fields in the caller's words (``TASKS_WORDS``); by
    default they keep the job's (the API's, the admin's) names.
    """
    if hasattr(exc, "error_dict"):
        words = words or {}
        return "; ".join(
            f"{words.get(field, field)}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
    return " ".join(exc.messages)


def refused_arguments(exc):
    """Whether a ValidationError refuses a task's arguments (``args`` or ``kwargs``)."""
    return hasattr(exc, "error_dict") and not ARGUMENT_FIELDS.isdisjoint(exc.error_dict)
