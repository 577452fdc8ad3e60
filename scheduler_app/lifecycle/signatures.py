"""Whether arguments fit a task's signature, asked once per shape of call (the count and the keywords)."""

import functools
import inspect

from .. import registry


@functools.lru_cache(maxsize=1024)
def _signature(func):
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):  # a callable without a readable signature: let it be
        return None


def signature_problem(task, args, kwargs):
    """Return why ``args``/``kwargs`` cannot be passed to ``task``, or None.

    Binding looks only at how many positional arguments there are and which
    keywords, in which order: the answer is kept per shape, so a batch of
    jobs of one task binds once (a seventh of a bulk enqueue's Python).
    """
    try:
        return _shape_problem(task, len(args), tuple(kwargs))
    except TypeError:  # an unhashable Task (a list in a field): bind every time
        return _shape_problem.__wrapped__(task, len(args), tuple(kwargs))


@functools.lru_cache(maxsize=4096)
def _shape_problem(task, nargs, keywords):
    signature = _signature(task.func)
    if signature is None:
        return None
    args, kwargs = [None] * (nargs + task.takes_context), dict.fromkeys(keywords)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        shown = registry.describe(task)["signature"]
        return f"The arguments do not match {registry.name_of(task).rpartition('.')[2]}{shown}: {exc}."
    return None
