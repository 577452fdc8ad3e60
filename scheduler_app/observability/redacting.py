"""Log lines about a run that quote a filtered argument keep ``[FILTERED]`` (FILTER_ARGUMENTS).

Django's own line for a finished task (``django.tasks``: "Task id=...
state=FAILED" with the exception and its traceback) is written in the
attempt's thread from the exception the task raised, which may quote a
secret argument. ``hiding(secrets)`` marks the attempt's context; the
``Redacting`` filter on that logger replaces each secret in a record made
there. What the scheduler stores (errors, the task's own records) is
scrubbed where it is made (``runtime.executor``, ``joblogs.Capture``).
"""

import contextlib
import contextvars
import logging

from ..vocabulary.redaction import scrub

# The running attempt's secret texts (``vocabulary.redaction.secret_texts``); () outside an attempt.
_secrets = contextvars.ContextVar("scheduler_app_secrets", default=())
_formatter = logging.Formatter()
LOGGERS = ("django.tasks",)


class Redacting(logging.Filter):
    """Replace the running attempt's secrets in a record's message and traceback text."""

    def filter(self, record):
        secrets = _secrets.get()
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad %-format: the handler reports it as it would have
            return True
        hidden = scrub(message, secrets)
        if hidden != message:
            record.msg, record.args = hidden, None
        if record.exc_info and not record.exc_text:
            text = _formatter.formatException(record.exc_info)
            if scrub(text, secrets) != text:
                record.exc_text = scrub(text, secrets)  # the formatter uses it instead of the exception
        return True


@contextlib.contextmanager
def hiding(secrets):
    """Within the block (an attempt), records of ``LOGGERS`` keep [FILTERED] in place of ``secrets``."""
    token = _secrets.set(tuple(secrets))
    try:
        yield
    finally:
        _secrets.reset(token)


def install():
    """Put ``Redacting`` on ``LOGGERS`` once (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, Redacting) for f in logger.filters):
            logger.addFilter(Redacting())
