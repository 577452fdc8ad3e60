"""The scheduler's settings: ``settings.SCHEDULER`` over the declared defaults (``validation.settings``).

Read them through :func:`get`, never at import time, so tests can override
settings.
"""

from django.conf import settings

from .validation.durations import seconds_of
from .validation.settings import DECLARED
from .vocabulary.bounds import QUEUE_NAME_RE
from .vocabulary.redaction import redact, redact_head, restore

# Each key's default, as declared with its rule and meaning (``validation.settings``).
DEFAULTS = {name: setting.default for name, setting in DECLARED.items()}


def scheduler_backends():
    """Return the ``settings.TASKS`` backends that enqueue into this scheduler."""
    from django.tasks import task_backends

    return [b for b in task_backends.all() if getattr(b, "is_scheduler_backend", False)]


def backend_options():
    """Return the OPTIONS of the scheduler's first task backend (the defaults of jobs made outside django.tasks)."""
    backends = scheduler_backends()
    return dict(backends[0].options) if backends else {}


def known_queues():
    """Return the names of the queues the scheduler's task backends serve (a frozenset).

    A name that does not match ``bounds.QUEUE_NAME_PATTERN`` is left out: it
    could not be part of a URL (the dashboard's pause links). The system
    check ``scheduler_app.E001`` reports it at start-up. Kept until
    ``settings.TASKS`` changes: every enqueue asks.
    """
    if _known_queues is None:
        queues = set()
        for backend in scheduler_backends():
            queues |= {q for q in backend.queues if isinstance(q, str) and QUEUE_NAME_RE.fullmatch(q)}
        _set_known_queues(frozenset(queues))
    return _known_queues


_known_queues = None


def _set_known_queues(value):
    global _known_queues
    _known_queues = value


def on_setting_changed(*, setting, **kwargs):
    """Forget the known queues when ``TASKS`` changes (a receiver of ``setting_changed``: ``apps.py``)."""
    if setting == "TASKS":
        _set_known_queues(None)


def queue_defaults(name):
    """Return the limits ``SCHEDULER["QUEUES"]`` gives queue ``name`` (no limit where it says nothing)."""
    entry = (get("QUEUES") or {}).get(name) or {}
    return {
        "concurrency_limit": entry.get("concurrency_limit"),
        "rate_limit": entry.get("rate_limit"),
        "rate_period": seconds_of(entry.get("rate_period")) or 1.0,  # "5m" too (the system check refuses worse)
    }


def queue_mode(name):
    """Return how ``SCHEDULER["QUEUES"]`` says queue ``name``'s jobs run: "thread" (the default), "process" or "async"."""
    return ((get("QUEUES") or {}).get(name) or {}).get("mode") or "thread"


def get(name):
    """Return the setting ``name`` from settings.SCHEDULER or its default."""
    overrides = getattr(settings, "SCHEDULER", None) or {}
    if name == "RETENTION":
        return {**DEFAULTS["RETENTION"], **overrides.get("RETENTION", {})}
    return overrides.get(name, DEFAULTS[name])


# FILTER_ARGUMENTS as checked, by the list's words: read for every job run and
# every page shown, checked once per value (a test's override_settings is a new one).
_filter_names = {}


def filter_names():
    """Return ``FILTER_ARGUMENTS`` as a frozenset of lower-case names; ImproperlyConfigured when it is not valid."""
    value = get("FILTER_ARGUMENTS")
    # By its words, not the object: a list changed in place is checked afresh.
    key = tuple(value) if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value) else None
    if key is not None and key in _filter_names:
        return _filter_names[key]
    from django.core.exceptions import ImproperlyConfigured, ValidationError

    try:
        names = DECLARED["FILTER_ARGUMENTS"].rule.check(value)
    except ValidationError as exc:
        raise ImproperlyConfigured(
            f"SCHEDULER['FILTER_ARGUMENTS'] is {value!r}: {' '.join(exc.messages)} E.g. ['password', 'token']."
        ) from None
    names = frozenset(name.strip().lower() for name in names)
    if key is not None:
        if len(_filter_names) >= 16:
            _filter_names.clear()
        _filter_names[key] = names
    return names


def filtered(value):
    """Return a job's kwargs (or any JSON value) with the values of ``FILTER_ARGUMENTS`` keys shown as [FILTERED].

    The one function every page, response, log line and audit entry shows
    arguments through; the task itself gets the real values. A text (the
    job list's cut preview of a long value's JSON) ends before the value
    of its first filtered key.
    """
    names = filter_names()
    return redact_head(value, names) if isinstance(value, str) else redact(value, names)


def unfiltered(new, old):
    """Return kwargs ``new`` with each [FILTERED] under a filtered name replaced by ``old``'s real value.

    A client that sends back what it read (a PATCH of a schedule, a form
    saved as shown) keeps the secrets it never saw.
    """
    return restore(new, old, filter_names())
