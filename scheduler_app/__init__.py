"""A priority job scheduler for Django: timed jobs, a dispatcher, an admin and an API.

The public names, importable from ``scheduler_app``:

- ``options``: per-task policy, stacked on Django's ``@task``;
- ``Snooze``: raise it from a task to run again later without counting an attempt;
- ``JobCancelled``: raise it from a task that saw its cancel request;
- ``enqueue``, ``enqueue_many``: make jobs from code (``lifecycle``);
- ``hold_signals_for_dispatcher``: the first line of a project's ``manage.py``
  (a SIGTERM while ``rundispatcher`` starts stops it gracefully).

Importing the package loads no Django: these names come from the pure
bottom of the app (``vocabulary``, ``validation.options``,
``dispatcher.shutdown``), and the service's names load when first used.
"""

__version__ = "0.9.0"

from .dispatcher.shutdown import hold_signals_for_dispatcher  # pure: no Django
from .validation.durations import Snooze  # no Django: pytimeparse2 reads its durations
from .validation.options import options  # pure: no Django
from .vocabulary.endings import JobCancelled  # pure: no Django

_LAZY = {"enqueue": "scheduler_app.lifecycle", "enqueue_many": "scheduler_app.lifecycle"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scheduler_app' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["JobCancelled", "Snooze", "__version__", "enqueue", "enqueue_many", "hold_signals_for_dispatcher", "options"]
