"""The scheduler's settings: ``settings.SCHEDULER`` over the declared defaults (``validation.settings``).

Read them through :func:`get`, never at import time, so tests can override
settings.
"""

from django.conf import settings
from django.core.signals import setting_changed

from .validation.durations import seconds_of
from .validation.settings import DECLARED
from .vocabulary.bounds import QUEUE_NAME_RE

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

    A name that does not match ``limits.QUEUE_NAME_PATTERN`` is left out: it
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


def _forget(*, setting, **kwargs):
    if setting == "TASKS":
        _set_known_queues(None)


setting_changed.connect(_forget, dispatch_uid="scheduler_app.conf")


def queue_defaults(name):
    """Return the limits ``SCHEDULER["QUEUES"]`` gives queue ``name`` (no limit where it says nothing)."""
    entry = (get("QUEUES") or {}).get(name) or {}
    return {
        "concurrency_limit": entry.get("concurrency_limit"),
        "rate_limit": entry.get("rate_limit"),
        "rate_period": seconds_of(entry.get("rate_period")) or 1.0,  # "5m" too (the system check refuses worse)
    }


def queue_mode(name):
    """Return how ``SCHEDULER["QUEUES"]`` says queue ``name``'s jobs run: "thread" (the default) or "process"."""
    return ((get("QUEUES") or {}).get(name) or {}).get("mode") or "thread"


def get(name):
    """Return the setting ``name`` from settings.SCHEDULER or its default."""
    overrides = getattr(settings, "SCHEDULER", None) or {}
    if name == "RETENTION":
        return {**DEFAULTS["RETENTION"], **overrides.get("RETENTION", {})}
    return overrides.get(name, DEFAULTS[name])
