"""Per-task policy, stated next to the task's code: ``@options`` stacked on Django's ``@task``.

    from django.tasks import task
    from scheduler_app import options

    @options(max_attempts=5, timeout=30, retry_on=(IOError,), backoff=10, unique=True, unique_for=3600, tags=["sync"])
    @task(queue_name="slow")
    def sync_account(account_id): ...

Precedence, highest first: the job's own fields (API, admin, command),
the task's ``@options``, the backend's ``TASKS[...]["OPTIONS"]``, then
``settings.SCHEDULER``. The effective ``max_attempts`` and ``timeout`` are
copied into the job row at enqueue.

The values are checked when the module is imported, by the same rules that
check a job's fields, so a typo fails at start-up, not at the first run.
"""

import hashlib
import json
from dataclasses import dataclass

OPTIONS_ATTRIBUTE = "__scheduler_options__"


@dataclass(frozen=True)
class TaskOptions:
    max_attempts: int | None = None
    timeout: float | None = None
    # Exception classes that are retried; any other exception fails the job
    # at once. None: every exception is retried while attempts remain.
    retry_on: tuple | None = None
    backoff: float | None = None  # base seconds, doubled per attempt, capped by RETRY_BACKOFF_MAX
    unique: object = None  # True, or a callable(*args, **kwargs) -> key text
    # Seconds a unique key stays taken after a job with it is made, whatever
    # becomes of the job but a cancel (without ``unique``, the key is the
    # task's and the arguments' as with unique=True); also the longest a job
    # of the task may ask for.
    unique_for: float | None = None
    # A callable(args, kwargs) that raises Django's ValidationError for
    # arguments the task refuses: run by ``build_job``, so every way of
    # making a job refuses them, with the callable's message (a plain one
    # is the "args" field's).
    validate: object = None
    # A format string over the task's bound arguments ("account:{account_id}"):
    # at most concurrency_limit jobs with the key it makes run at once.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    # Seconds after its creation that a job of the task expires if not started by then.
    expires_in: float | None = None

    # Tags every job of the task gets unless the caller gives its own (``validation.labels.TAGS``).
    tags: tuple | None = None

    def describe(self):
        """Return the options as JSON-friendly values (the API's task list, the admin)."""
        data = {}
        for name in (
            "max_attempts",
            "timeout",
            "backoff",
            "unique_for",
            "concurrency_key",
            "concurrency_limit",
            "expires_in",
        ):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        if self.tags:
            data["tags"] = list(self.tags)
        if self.retry_on is not None:
            data["retry_on"] = [f"{c.__module__}.{c.__qualname__}" for c in self.retry_on]
        if self.unique is True:
            data["unique"] = True
        elif self.unique is not None:
            data["unique"] = f"{self.unique.__module__}.{self.unique.__qualname__}"
        return data

    def unique_key(self, task_name, args, kwargs, *, unique_for=None):
        """Return the unique key ``unique`` makes for these arguments, or None.

        With ``unique_for`` (the job's or the task's) and no ``unique``, the
        key is the task's and the arguments', as with ``unique=True``.
        """
        unique = self.unique
        if (unique is None or unique is False) and (unique_for or self.unique_for):
            unique = True
        if unique is None or unique is False:
            return None
        if unique is True:
            text = json.dumps([args, kwargs], sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            return f"{task_name}:{digest}"
        return f"{task_name}:{unique(*args, **kwargs)}"


NONE = TaskOptions()


def options(
    *,
    max_attempts=None,
    timeout=None,
    retry_on=None,
    backoff=None,
    unique=None,
    unique_for=None,
    validate=None,
    concurrency_key=None,
    concurrency_limit=None,
    expires_in=None,
    tags=None,
):
    """Attach scheduling options to a task (above ``@task``) or to its function (below it)."""
    from django.core.exceptions import ImproperlyConfigured

    from . import admission

    given = {
        "max_attempts": max_attempts,
        "timeout": timeout,
        "backoff": backoff,
        "unique_for": unique_for,
        "concurrency_key": concurrency_key,
        "concurrency_limit": concurrency_limit,
        "expires_in": expires_in,
        "tags": tags,
    }
    checked = _checked(given)
    if retry_on is not None:
        retry_on = tuple(retry_on) if isinstance(retry_on, (tuple, list)) else (retry_on,)
        if not retry_on or not all(isinstance(c, type) and issubclass(c, BaseException) for c in retry_on):
            raise ImproperlyConfigured("@options: retry_on must be exception classes.")
    if not (unique is None or isinstance(unique, bool) or callable(unique)):
        raise ImproperlyConfigured("@options: unique must be True or a callable making the key from the arguments.")
    if validate is not None and not callable(validate):
        raise ImproperlyConfigured("@options: validate must be a callable taking (args, kwargs).")
    chosen = TaskOptions(retry_on=retry_on, unique=unique, validate=validate, **checked)

    def decorate(target):
        func = getattr(target, "func", target)  # a django.tasks Task, or its function
        if concurrency_key is not None:
            problem = admission.key_template_problem(concurrency_key, func)
            if problem:
                raise ImproperlyConfigured(f"@options: concurrency_key: {problem}")
        setattr(func, OPTIONS_ATTRIBUTE, chosen)
        return target

    return decorate


def _checked(given):
    """Return ``given`` options checked by their rules (the values a rule normalises, normalised)."""
    from django.core.exceptions import ImproperlyConfigured, ValidationError

    from . import admission, fields
    from .labels import TAGS

    checks = {
        "max_attempts": fields.MAX_ATTEMPTS.check,
        "timeout": fields.TIMEOUT.check,
        "backoff": fields.BACKOFF.check,
        "unique_for": fields.UNIQUE_FOR.check,
        "concurrency_key": admission.KEY_TEMPLATE.check,
        "concurrency_limit": admission.JOB_CONCURRENCY_LIMIT.check,
        "expires_in": admission.EXPIRES_IN.check,
        "tags": lambda value: tuple(TAGS.check(value)),
    }
    # Values kept as given: the rule only judges them.
    as_given = {"max_attempts", "concurrency_key", "concurrency_limit"}
    checked = {}
    try:
        for name, value in given.items():
            if value is None:
                checked[name] = None
                continue
            result = checks[name](value)
            checked[name] = value if name in as_given else result
    except ValidationError as exc:
        raise ImproperlyConfigured(
            f"@options: {'; '.join(f'{k}: {v[0]}' for k, v in exc.message_dict.items())}"
        ) from None
    return checked


def options_of(task):
    """Return the TaskOptions of a Task (or its function); empty when it has none."""
    func = getattr(task, "func", task)
    return getattr(func, OPTIONS_ATTRIBUTE, NONE)
