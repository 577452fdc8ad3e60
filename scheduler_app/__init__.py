"""A priority job scheduler for Django: timed jobs, a dispatcher, an admin and an API.

The public names, importable from ``scheduler_app``:

- ``options``: per-task policy, stacked on Django's ``@task``;
- ``Snooze``: raise it from a task to run again later without counting an attempt;
- ``enqueue``, ``enqueue_many``: make jobs from code (``lifecycle``).

Importing the package loads no Django: the pure dispatcher core lives in
it, and the service's names load when first used.
"""

__version__ = "0.9.0"

from .snooze import Snooze  # pure: no Django
from .task_options import options  # noqa: E402  (pure: no Django)

_LAZY = {"enqueue": "scheduler_app.lifecycle", "enqueue_many": "scheduler_app.lifecycle"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scheduler_app' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["Snooze", "__version__", "enqueue", "enqueue_many", "options"]
