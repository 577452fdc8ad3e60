"""What a valid job is: one rule per field, one wording per rule.

Every entry point hands what it received to these rules and only translates
their ``ValidationError`` (errors keyed by field name) into its own shape:
the API a 400 with field errors, the admin an inline form error, a command
one line and exit code 2, ``task.enqueue()`` an ``InvalidTask``. Entry points
that receive text (a command line, a form) parse it with the same rule's
``parse``, so a typo and an out-of-range value get the same message.
"""

import functools
import inspect
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.tasks import Task
from django.utils import timezone

from .. import conf, registry
from ..models import Job
from ..validation.fields import (
    ARGS,
    CONCURRENCY_LIMIT,
    DELAY,
    DEPENDS_ON,
    EXECUTE_AT,
    KWARGS,
    MAX_ATTEMPTS,
    ON_DEPENDENCY_FAILURE,
    PRIORITY,
    RATE_LIMIT,
    RATE_PERIOD,
    TIMEOUT,
    UNIQUE_FOR,
    UNIQUE_KEY,
    Rule,
)
from ..validation.options import options_of
from ..vocabulary.bounds import QUEUE_NAME_MAX, QUEUE_NAME_RE


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
    """A queue the scheduler's backends serve; every queue name matches ``limits.QUEUE_NAME_PATTERN``."""

    shape = f"queue names are 1 to {QUEUE_NAME_MAX} letters, digits, '_', '.' or '-'"

    def __init__(self):
        super().__init__("queue", "")

    @staticmethod
    def well_formed(value):
        return isinstance(value, str) and QUEUE_NAME_RE.fullmatch(value) is not None

    def check(self, value):
        known = ", ".join(sorted(conf.known_queues()))
        if not self.well_formed(value):  # not echoed: it could be anything
            self.fail(f"Unknown queue: {self.shape}. Known queues: {known}.")
        if value not in conf.known_queues():
            self.fail(f"Unknown queue '{value}'. Known queues: {known}.")
        return value

    def schema(self):
        return {"type": "string", "enum": sorted(conf.known_queues())}


TASK = TaskName()
QUEUE = QueueName()

RULES = {
    r.field: r
    for r in (
        TASK, ARGS, KWARGS, EXECUTE_AT, DELAY, PRIORITY, QUEUE, MAX_ATTEMPTS, TIMEOUT, UNIQUE_KEY, UNIQUE_FOR,
        DEPENDS_ON, ON_DEPENDENCY_FAILURE,
    )
}
# The limits of a queue (``lifecycle.queues``).
QUEUE_RULES = {r.field: r for r in (CONCURRENCY_LIMIT, RATE_LIMIT, RATE_PERIOD)}
BOTH_WHEN = "Give either execute_at or delay, not both."
UNIQUE_FOR_PAST_TASK = (
    "Must be at most {longest:g} seconds: the task's @options(unique_for=...) is the longest "
    "a job of it may hold its unique key."
)


def validate_priority(value):
    return PRIORITY.check(value)


def validate_execute_at(value):
    return EXECUTE_AT.check(value)


class _Errors:
    """Collects every field's error, so one request learns all that is wrong with it."""

    def __init__(self):
        self.errors = {}

    def run(self, rule, value, how="check"):
        try:
            return getattr(rule, how)(value)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.errors.setdefault(field, []).extend(messages)
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
    unique_for=None,
    depends_on=None,
    on_dependency_failure=None,
    created_by=None,
    schedule=None,
    now=None,
    backend_options=None,
):
    """Validate a job description and return an unsaved Job.

    ``None`` means "the default": now, the task's priority and queue; for
    ``max_attempts``, ``timeout``, ``unique_key`` and ``unique_for``, the
    task's ``@options``, then the backend's ``OPTIONS`` (``backend_options``,
    default: those of the scheduler's first backend), then
    ``settings.SCHEDULER``. ``delay`` (seconds from now) is the other way to
    give ``execute_at``. The arguments must bind to the task's signature,
    pass its ``@options(validate=...)``, and take at most
    ``SCHEDULER["ARGS_MAX_BYTES"]`` together; ``unique_for`` may not exceed
    the task's own.
    ``depends_on`` (job ids, or Jobs) and ``unique_for`` need the database
    to be settled (``creation``): the job carries them as ``_depends_on``
    and ``_unique_for``. Raise ValidationError with errors keyed by field name.
    """
    errors = _Errors()
    now = now or timezone.now()
    task_obj = errors.run(TASK, task)
    args, args_size = errors.run(ARGS, [] if args is None else args, "sized") or (None, 0)
    kwargs, kwargs_size = errors.run(KWARGS, {} if kwargs is None else kwargs, "sized") or (None, 0)
    size_problem = arguments_size_problem(args_size, kwargs_size)
    if size_problem:
        errors.add("kwargs" if kwargs_size > args_size else "args", size_problem)
    task_options = options_of(task_obj) if task_obj is not None else None
    if task_obj is not None and args is not None and kwargs is not None:
        problem = signature_problem(task_obj, args, kwargs)
        if problem:
            errors.add("args", problem)
        elif task_options.validate is not None:
            _validate_arguments(errors, task_options.validate, args, kwargs)
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
    defaults = conf.backend_options() if backend_options is None else backend_options
    if max_attempts is None and task_options is not None:
        max_attempts = task_options.max_attempts
    if max_attempts is None:
        max_attempts = defaults.get("max_attempts", conf.get("DEFAULT_MAX_ATTEMPTS"))
    errors.run(MAX_ATTEMPTS, max_attempts)
    if timeout is None and task_options is not None:
        timeout = task_options.timeout
    if timeout is None:
        timeout = defaults.get("timeout")
    if timeout is not None:
        timeout = errors.run(TIMEOUT, timeout)
    if unique_for is None and task_options is not None:
        unique_for = task_options.unique_for
    if unique_for is not None:
        unique_for = errors.run(UNIQUE_FOR, unique_for)
        longest = task_options.unique_for if task_options is not None else None
        if unique_for is not None and longest is not None and unique_for > longest:
            # The task's author chose how long its key stays taken; a job may not take it for longer.
            errors.add("unique_for", UNIQUE_FOR_PAST_TASK.format(longest=longest))
    depends_on = [] if depends_on is None else errors.run(DEPENDS_ON, depends_on) or []
    if on_dependency_failure is None:
        on_dependency_failure = "cancel"
    errors.run(ON_DEPENDENCY_FAILURE, on_dependency_failure)
    if unique_key == "":
        unique_key = None
    if unique_key is None and task_options is not None and not {"args", "kwargs"} & set(errors.errors):
        try:
            unique_key = task_options.unique_key(registry.name_of(task_obj), args, kwargs, unique_for=unique_for)
        except Exception as exc:  # the task's own callable raised
            errors.add("unique_key", f"The task's unique key could not be made: {type(exc).__name__}: {exc}")
    if unique_key is not None:
        errors.run(UNIQUE_KEY, unique_key)
    errors.raise_if_any()
    job = new_job(
        task=registry.name_of(task_obj),
        args=args,
        kwargs=kwargs,
        queue=queue,
        priority=priority,
        execute_at=execute_at,
        max_attempts=max_attempts,
        timeout=timeout,
        unique_key=unique_key,
        created_by_id=getattr(created_by, "pk", created_by),
        schedule_id=getattr(schedule, "pk", schedule),
        created_at=now,
        updated_at=now,
        on_dependency_failure=on_dependency_failure,
        has_dependencies=bool(depends_on),
    )
    if created_by is not None and not isinstance(created_by, int):
        job.created_by = created_by  # the instance, cached as Job(created_by=...) would
    job._depends_on = depends_on
    job._unique_for = unique_for
    return job


def arguments_size_problem(args_size, kwargs_size):
    """Return why arguments of these sizes (``rules.json_size``) are too large, or None."""
    limit = conf.get("ARGS_MAX_BYTES")
    if args_size + kwargs_size <= limit:
        return None
    return (
        f"The arguments take {args_size + kwargs_size:,} bytes as JSON (args and kwargs together); "
        f'at most {limit:,} (SCHEDULER["ARGS_MAX_BYTES"]).'
    )


def _validate_arguments(errors, validate, args, kwargs):
    """Run a task's ``@options(validate=...)``; its refusals become field errors."""
    try:
        validate(args, kwargs)
    except ValidationError as exc:
        errors.merge(exc, "args")
    except Exception as exc:  # the task's own callable raised
        errors.add("args", f"The task's check of its arguments failed: {type(exc).__name__}: {exc}")


def new_job(**values):
    """Return an unsaved Job of ``values`` (by attname), every other field at its default.

    Same instance as ``Job(**values)``, built the way Django builds rows it
    reads (positional values): a third of the time, on every enqueue's path.
    """
    template, made, positions = _job_defaults()
    row = template.copy()
    for position, attname, make in made:
        if attname not in values:
            row[position] = make()
    try:
        for name, value in values.items():
            row[positions[name]] = value
    except KeyError:
        raise TypeError(f"Job has no field {sorted(values.keys() - positions.keys())[0]!r}") from None
    return Job(*row)


@functools.cache
def _job_defaults():
    """Return the Job's default row: ``(values, [(position, attname, callable)], {attname: position})``.

    A default that is not a callable is the same object at every
    ``get_default()`` (Django hands out ``self.default`` itself), so it is
    asked once; callable defaults are called per job, as Django calls them
    (for the fields ``values`` leaves out: the others would be overwritten).
    Asking 31 fields per job was two fifths of building one.
    """
    fields = Job._meta.concrete_fields
    made = [(i, f.attname, f.default) for i, f in enumerate(fields) if f.has_default() and callable(f.default)]
    template = [None if f.has_default() and callable(f.default) else f.get_default() for f in fields]
    return template, made, {f.attname: i for i, f in enumerate(fields)}


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


def error_text(exc):
    """Return a ValidationError as one line: ``field: message; field: message``."""
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
    return " ".join(exc.messages)
