"""A job's fields when the caller leaves them out, as data: where each value comes from, in order.

``build_job`` (``lifecycle.building``) asks :func:`chosen` for every field
of :data:`PRECEDENCE`; the first source that has a value wins. The sources:

- ``"task"``: the Task's own attribute (``@task(priority=..., queue_name=...)``,
  or ``task.using(...)``) when it is not Django's default (priority 0, queue
  "default"): django.tasks cannot tell a default it was given from one it
  was not, so Django's default counts as "not set";
- ``"route"``: the first entry of ``settings.SCHEDULER["ROUTES"]`` whose task
  path or glob matches the task (``validation.labels.route_of``);
- ``"django"``: Django's defaults (priority 0, queue "default");
- ``"options"``: the task's ``@options(...)`` (``validation.options``);
- ``"backend"``: the ``OPTIONS`` of the scheduler's ``TASKS`` backend;
- ``"settings"``: ``settings.SCHEDULER`` (``validation.settings``).

A value the caller gives always wins. So a job's queue and priority are:
the caller's (API field, ``enqueue()`` argument, command option) > the
task's own (declared or ``using()``) > the route > Django's default; a route
fills what neither the call nor the task's code chose. ``tags`` come from
the caller, else from ``@options(tags=...)``. No lookups here:
``build_job`` hands in the sources.
"""

PRECEDENCE = {
    "priority": (("task", "priority"), ("route", "priority"), ("django", "priority")),
    "queue": (("task", "queue_name"), ("route", "queue"), ("django", "queue_name")),
    "max_attempts": (("options", "max_attempts"), ("backend", "max_attempts"), ("settings", "DEFAULT_MAX_ATTEMPTS")),
    "timeout": (("options", "timeout"), ("backend", "timeout")),
    "unique_for": (("options", "unique_for"),),
    "tags": (("options", "tags"),),
}

BOTH_WHEN = "Give either execute_at or delay, not both."
UNIQUE_FOR_PAST_TASK = (
    "Must be at most {longest:g} seconds: the task's @options(unique_for=...) is the longest "
    "a job of it may hold its unique key."
)


def chosen(field, given, sources):
    """Return ``given``, else the first value the sources of ``PRECEDENCE[field]`` have (None: no source has one).

    ``sources`` maps each source's name to a function of a key that returns
    its value there, or None.
    """
    if given is not None:
        return given
    for source, key in PRECEDENCE[field]:
        value = sources[source](key)
        if value is not None:
            return value
    return None


def arguments_size_problem(args_size, kwargs_size, limit):
    """Return why arguments of these sizes (``storable.json_size``) are larger than ``limit``, or None."""
    if args_size + kwargs_size <= limit:
        return None
    return (
        f"The arguments take {args_size + kwargs_size:,} bytes as JSON (args and kwargs together); "
        f'at most {limit:,} (SCHEDULER["ARGS_MAX_BYTES"]).'
    )
