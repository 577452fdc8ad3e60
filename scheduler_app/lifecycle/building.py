"""What a job is made of, and ``build_job``: every field's rule, and where a value left out comes from.

The plain fields' rules are ``validation.fields``'s; the task and the queue
depend on what this installation runs (the registry of tasks, the queues of
its ``TASKS`` backends), so their rules live here. Which source gives a
value the caller left out is data (``validation.jobs.PRECEDENCE``).

Every entry point hands what it received to :func:`build_job` (or to one
field's rule) and only translates its ``ValidationError`` (errors keyed by
field name) into its own shape: the API a 400 with field errors, the admin
an inline form error, a command one line and exit code 2, ``task.enqueue()``
an ``InvalidTask``. Entry points that receive text (a command line, a form)
parse it with the same rule's ``parse``, so a typo and an out-of-range value
get the same message.
"""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.tasks import Task
from django.tasks.base import DEFAULT_TASK_PRIORITY, DEFAULT_TASK_QUEUE_NAME
from django.utils import timezone

from .. import conf, registry, taskresults
from ..models.workflows import current_workflow
from ..validation import admission
from ..validation.errors import Errors
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
from ..validation.jobs import BOTH_WHEN, UNIQUE_FOR_PAST_TASK, arguments_size_problem, chosen
from ..validation.labels import META, TAGS, route_of
from ..validation.options import options_of
from ..validation.workflows import PASS_RESULTS
from ..vocabulary.bounds import QUEUE_NAME_MAX, QUEUE_NAME_RE
from .rows import new_job
from .signatures import signature_problem


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
    """A queue the scheduler's backends serve; every queue name matches ``bounds.QUEUE_NAME_PATTERN``."""

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
        TASK,
        ARGS,
        KWARGS,
        EXECUTE_AT,
        DELAY,
        PRIORITY,
        QUEUE,
        MAX_ATTEMPTS,
        TIMEOUT,
        UNIQUE_KEY,
        UNIQUE_FOR,
        DEPENDS_ON,
        ON_DEPENDENCY_FAILURE,
        PASS_RESULTS,
        TAGS,
        META,
    )
}
# The limits of a queue (``lifecycle.queues``).
QUEUE_RULES = {r.field: r for r in (CONCURRENCY_LIMIT, RATE_LIMIT, RATE_PERIOD)}


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
    pass_results=False,
    workflow=None,
    concurrency_key=None,
    concurrency_limit=None,
    expires_in=None,
    expires_at=None,
    tags=None,
    meta=None,
    _memo=None,
):
    """Validate a job description and return an unsaved Job; raise ValidationError with errors keyed by field.

    ``None`` means "the default": now for the time, ``validation.jobs.PRECEDENCE``
    for priority, queue, max_attempts, timeout and unique_for (the task, its
    ``@options``, the backend's ``OPTIONS`` (``backend_options``, default:
    the scheduler's first backend's), ``settings.SCHEDULER``). ``delay``
    (seconds from now) is the other way to give ``execute_at``. The arguments
    must bind to the task's signature, pass its ``@options(validate=...)``
    and take at most ``SCHEDULER["ARGS_MAX_BYTES"]``; ``unique_for`` may not
    exceed the task's own. ``depends_on`` (job ids, or Jobs) and
    ``unique_for`` need the database (``creation``): the job carries them as
    ``_depends_on`` and ``_unique_for``. ``workflow``: see ``_membership``.
    ``concurrency_key``/``concurrency_limit`` and ``expires_in``/``expires_at``
    follow ``validation.admission`` (the task's ``@options`` give them when
    the caller does not).
    ``tags`` (default: ``@options(tags=...)``) and ``meta`` (default {}) are
    ``validation.labels``'s. ``_memo``: a dict one call shares between the
    jobs it builds (``enqueue_many``), which keeps the defaults precedence
    chose per task and backend options (they depend on nothing else).
    """
    errors = Errors()
    now = now or timezone.now()
    task_obj = errors.run(TASK, task)
    task_options = options_of(task_obj) if task_obj is not None else None
    pass_results = bool(errors.run(PASS_RESULTS, pass_results))  # the results come first in ``args``
    args, kwargs = _arguments(errors, task_obj, task_options, args, kwargs, pass_results)
    given = {
        "priority": priority,
        "queue": queue,
        "max_attempts": max_attempts,
        "timeout": timeout,
        "unique_for": unique_for,
        "tags": tags,
    }
    values = _chosen_fields(errors, given, task_obj, task_options, backend_options, _memo)
    _unique_for_within_tasks(errors, values["unique_for"], task_options)
    execute_at = due_at(errors, execute_at, delay, now)
    depends_on = [] if depends_on is None else errors.run(DEPENDS_ON, depends_on) or []
    on_dependency_failure = on_dependency_failure or "cancel"
    errors.run(ON_DEPENDENCY_FAILURE, on_dependency_failure)
    unique_key = _unique_key(errors, unique_key, task_obj, task_options, args, kwargs, values["unique_for"])
    admitted = _admission(
        errors, task_obj, task_options, args, kwargs, concurrency_key, concurrency_limit, expires_in, expires_at, now
    )
    meta = {} if meta is None else errors.run(META, meta)
    errors.raise_if_any()
    job = new_job(
        task=registry.name_of(task_obj),
        args=args,
        kwargs=kwargs,
        execute_at=execute_at,
        unique_key=unique_key,
        **{field: values[field] for field in ("queue", "priority", "max_attempts", "timeout")},
        created_by_id=getattr(created_by, "pk", created_by),
        schedule_id=getattr(schedule, "pk", schedule),
        created_at=now,
        updated_at=now,
        on_dependency_failure=on_dependency_failure,
        tags=values["tags"] or [],
        meta=meta,
        has_dependencies=bool(depends_on),
        pass_results=pass_results,
        **_membership(workflow),
        **admitted,
        backend=_backend_of(task),
    )
    if created_by is not None and not isinstance(created_by, int):
        job.created_by = created_by  # the instance, cached as Job(created_by=...) would
    job._depends_on = depends_on
    job._unique_for = values["unique_for"]
    return job


def _backend_of(task):
    """Return the backend alias a job keeps: a Task's (``task.using(backend=...)``), as its results report it.

    A task given by name (the admin, the API, a command, a schedule): "",
    and its results report the task's own backend.
    """
    return taskresults.sender_of(task)[1] if isinstance(task, Task) else ""


def _sources(task_obj, task_options, backend_options):
    """Return the sources of ``validation.jobs.PRECEDENCE``: each a function of a key."""
    defaults = conf.backend_options() if backend_options is None else backend_options
    route = route_of(registry.name_of(task_obj), conf.get("ROUTES")) if task_obj is not None else {}
    return {
        "task": lambda key: declared(key, getattr(task_obj, key, None)),
        "route": route.get,
        "django": _DJANGO_DEFAULTS.get,
        "options": lambda key: getattr(task_options, key, None),
        "backend": defaults.get,
        "settings": conf.get,
    }


_DJANGO_DEFAULTS = {"priority": DEFAULT_TASK_PRIORITY, "queue_name": DEFAULT_TASK_QUEUE_NAME}


def declared(key, value):
    """Return a Task's priority or queue_name, or None where it is Django's default (a route may set it)."""
    return None if type(value) is type(_DJANGO_DEFAULTS[key]) and value == _DJANGO_DEFAULTS[key] else value


# The rule of each field whose default is chosen by precedence.
_CHOSEN = {
    "priority": PRIORITY,
    "queue": QUEUE,
    "max_attempts": MAX_ATTEMPTS,
    "timeout": TIMEOUT,
    "unique_for": UNIQUE_FOR,
    "tags": TAGS,
}


def _chosen_fields(errors, given, task_obj, task_options, backend_options, memo=None):
    """Return each field of ``given``: the caller's value or the one precedence chose, checked by its rule."""
    values = {}
    defaults = None
    for field, value in given.items():
        if value is not None:
            values[field] = errors.run(_CHOSEN[field], value)
            continue
        if defaults is None:
            defaults = _defaults(task_obj, task_options, backend_options, memo)
        value, problems = defaults[field]
        for name, message in problems:
            errors.add(name, message)
        values[field] = list(value) if isinstance(value, list) else value
    return values


def _defaults(task_obj, task_options, backend_options, memo):
    """Return ``{field: (value precedence chose and its rule checked, [(field, message)] it raised)}``.

    The same for every job of one task and backend options: with ``memo``
    (one call's dict) worked out once per pair. The pair is kept with the
    answer, so an id the call's objects no longer hold is never mistaken.
    """
    key = (id(task_obj), id(backend_options))
    if memo is not None and key in memo:
        held_task, held_options, answer = memo[key]
        if held_task is task_obj and held_options is backend_options:
            return answer
    sources = _sources(task_obj, task_options, backend_options)
    answer = {}
    for field, rule in _CHOSEN.items():
        value = chosen(field, None, sources)
        probe = Errors()
        checked = None if value is None else probe.run(rule, value)
        answer[field] = (checked, [(name, m) for name, messages in probe.errors.items() for m in messages])
    if memo is not None:
        memo[key] = (task_obj, backend_options, answer)
    return answer


def _membership(workflow):
    """Return the workflow fields of a new job: its workflow's id, and ``has_dependents``.

    A job of a workflow takes the finish path of jobs with dependents (a
    transaction that settles what its ending changes): the workflow's status
    and callbacks depend on it.
    """
    workflow = current_workflow() if workflow is None else workflow
    if workflow is None:
        return {}
    return {"workflow_id": getattr(workflow, "pk", workflow), "has_dependents": True}


def _arguments(errors, task_obj, task_options, args, kwargs, pass_results=False):
    """Return ``(args, kwargs)`` checked: their shapes, their size, the task's signature and its own check.

    With ``pass_results`` the signature must take one more first positional
    argument (the results it will receive; a None stands for them here).
    """
    args, args_size = errors.run(ARGS, [] if args is None else args, "sized") or (None, 0)
    kwargs, kwargs_size = errors.run(KWARGS, {} if kwargs is None else kwargs, "sized") or (None, 0)
    size_problem = arguments_size_problem(args_size, kwargs_size, conf.get("ARGS_MAX_BYTES"))
    if size_problem:
        errors.add("kwargs" if kwargs_size > args_size else "args", size_problem)
    if task_obj is not None and args is not None and kwargs is not None:
        problem = signature_problem(task_obj, [None, *args] if pass_results else args, kwargs)
        if problem:
            errors.add("args", problem)
        elif task_options.validate is not None:
            _validate_arguments(errors, task_options.validate, args, kwargs)
    return args, kwargs


def due_at(errors, execute_at, delay, now):
    """Return when the job is due: ``execute_at``, or ``delay`` seconds from ``now``, or now (a new job, a reschedule)."""
    if delay is not None:
        if execute_at is not None:
            errors.add("delay", BOTH_WHEN)
        elif (seconds := errors.run(DELAY, delay)) is not None:
            return now + timedelta(seconds=seconds)
    if execute_at is None:
        return now
    return errors.run(EXECUTE_AT, execute_at)


def _unique_key(errors, unique_key, task_obj, task_options, args, kwargs, unique_for):
    """Return the job's unique key: the caller's, or the one the task's ``@options(unique=...)`` makes."""
    if unique_key == "":
        unique_key = None
    if unique_key is None and task_options is not None and not {"args", "kwargs"} & set(errors.errors):
        try:
            unique_key = task_options.unique_key(registry.name_of(task_obj), args, kwargs, unique_for=unique_for)
        except Exception as exc:  # noqa: BLE001 - the task's own callable raised
            errors.add("unique_key", f"The task's unique key could not be made: {type(exc).__name__}: {exc}")
    if unique_key is not None:
        errors.run(UNIQUE_KEY, unique_key)
    return unique_key


def _unique_for_within_tasks(errors, unique_for, task_options):
    longest = getattr(task_options, "unique_for", None)
    if unique_for is not None and longest is not None and unique_for > longest:
        # The task's author chose how long its key stays taken; a job may not take it for longer.
        errors.add("unique_for", UNIQUE_FOR_PAST_TASK.format(longest=longest))


def _admission(errors, task_obj, task_options, args, kwargs, key, limit, expires_in, expires_at, now):
    """Return the job's ``concurrency_key``, ``concurrency_limit`` and ``expires_at``: the caller's, else ``@options``'."""
    if key == "":
        key = None
    if key is None and task_options is not None and task_options.concurrency_key is not None:
        if not {"args", "kwargs"} & set(errors.errors):
            try:
                key = admission.render_key(
                    task_options.concurrency_key, task_obj.func, args, kwargs, takes_context=task_obj.takes_context
                )
            except ValueError as exc:
                errors.add("concurrency_key", f"The task's concurrency key could not be made: {exc}")
    if key is not None:
        key = errors.run(admission.CONCURRENCY_KEY, key)
    if limit is None:
        limit = getattr(task_options, "concurrency_limit", None) or 1
    elif key is None and concurrency_key_missing(errors):
        errors.add("concurrency_limit", admission.KEY_WITHOUT_LIMIT)
    limit = errors.run(admission.JOB_CONCURRENCY_LIMIT, limit)
    if expires_in is None and expires_at is None:
        expires_in = getattr(task_options, "expires_in", None)
    expires = admission.expiry(errors, expires_in, expires_at, now)
    return {"concurrency_key": key, "concurrency_limit": limit, "expires_at": expires}


def concurrency_key_missing(errors):
    """Whether a limit without a key is the caller's mistake (not the echo of a key that failed its rule)."""
    return "concurrency_key" not in errors.errors


def _validate_arguments(errors, validate, args, kwargs):
    """Run a task's ``@options(validate=...)``; its refusals become field errors."""
    try:
        validate(args, kwargs)
    except ValidationError as exc:
        errors.merge(exc, "args")
    except Exception as exc:  # noqa: BLE001 - the task's own callable raised
        errors.add("args", f"The task's check of its arguments failed: {type(exc).__name__}: {exc}")
