"""The values the dispatcher passes between its store, its loop and its worker threads.

Pure: no Django. The Django store builds these from rows, the tests' fake
store builds them from dicts, and the loop cannot tell the two apart.
"""

import enum
from dataclasses import dataclass
from datetime import datetime


class _Choices(enum.EnumType):
    """What a Django field or a DRF ChoiceField reads of a choices enum (``choices``, ``values``, ``labels``).

    Django's ``TextChoices`` has these too; this module imports no Django, so the one
    status type gives them itself and ``models.JobStatus`` is this same class.
    """

    @property
    def values(cls):
        return [member.value for member in cls]

    @property
    def labels(cls):
        return [member.label for member in cls]

    @property
    def choices(cls):
        return [(member.value, member.label) for member in cls]


class Status(enum.StrEnum, metaclass=_Choices):
    """A job's status, as stored: the one type (``models.JobStatus`` is this class).

    A member is its stored text (``Status.PENDING == "pending"``, ``str()`` and
    f-strings give the text), so rows, SQL parameters and JSON take it as it is.
    The groups below are plain tuples of that text, not members.
    """

    PENDING = "pending"
    WAITING = "waiting"  # on dependencies: pending once the last one succeeds
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    ALL = enum.nonmember((PENDING, WAITING, RUNNING, SUCCEEDED, FAILED, CANCELLED))
    ACTIVE = enum.nonmember((PENDING, WAITING, RUNNING))
    FINISHED = enum.nonmember((SUCCEEDED, FAILED, CANCELLED))
    # What an attempt can end as: finished, or back to pending for a retry.
    OUTCOMES = enum.nonmember((SUCCEEDED, FAILED, CANCELLED, PENDING))
    # The endings a requested cancel overrides (``attempt_end``): anything
    # but a success, which stands (the work was done).
    YIELD_TO_CANCEL = enum.nonmember((PENDING, FAILED))

    # Django's templates call what is callable; a status class in a context stays a class.
    do_not_call_in_templates = enum.nonmember(True)

    @property
    def label(self):
        """Return the word a page shows: the stored text, capitalised ("Pending")."""
        return self.value.capitalize()


def attempt_end(status, cancel_requested):
    """Return the status a job is left in when an attempt ends as ``status`` (one of ``Status.OUTCOMES``).

    The one rule for how an attempt ends (invariant 14, docs/ARCHITECTURE.md): a job whose
    cancel was requested never starts again. A retry, a snooze, a release at
    shutdown, a rescue or a failure of such a job ends it ``cancelled``
    (the failed attempt's error is still recorded); a success stands.
    ``sql.base.ending`` is the same rule in SQL, for the statements that decide
    on the row's own flag.
    """
    if cancel_requested and status in Status.YIELD_TO_CANCEL:
        return Status.CANCELLED
    return status


@dataclass(slots=True)
class ClaimedJob:
    """One claimed attempt, as the dispatcher and its worker threads see it.

    Read-only by convention, not frozen: the loop builds one per claimed job,
    and a frozen dataclass sets each of its eighteen fields through
    ``object.__setattr__``, several times the cost of a plain one on the
    loop's thread (docs/BENCHMARKS.md, optimisation 41). Nothing assigns to
    it after the claim; ``dataclasses.replace`` makes a changed copy.
    """

    id: int
    task: str
    args: list
    kwargs: dict
    queue: str
    priority: int
    execute_at: float  # epoch seconds (read as such: any stored time converts)
    attempt: int
    max_attempts: int
    timeout: float | None
    cancel_requested: bool
    worker: str  # the id of the dispatcher process (its Worker row) that claimed it
    last_attempted_at: datetime  # this attempt's start: the claim's time
    started_at: datetime | None = None  # the first attempt's start
    enqueued_at: datetime | None = None
    # The earlier attempts' ``errors`` entries as stored: JSON text from the
    # claim, parsed only when the attempt's TaskResult is built.
    errors: str | list = "[]"
    snoozes: int = 0  # snoozes before this attempt
    backend: str = ""  # the TASKS alias its results report ("": the task's own backend)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, to be written by the store's ``finish``."""

    job_id: int
    worker: str  # the claiming dispatcher's id: finish is compare-and-set on it
    attempt: int
    status: str  # one of Status.OUTCOMES; pending = retry (or snooze) at retry_at
    result_json: str | None = None
    error: dict | None = None
    retry_at: datetime | None = None
    # Log records the attempt's own thread emitted (``joblogs``): tuples
    # ``(time in epoch seconds, level number, logger, message, exception text)``.
    logs: tuple = ()
    # A snooze: pending again at retry_at, the attempt not counted, no error.
    snoozed: bool = False
    # Records of this attempt written while it ran (``logflush``): ``logs`` are numbered after them.
    logs_before: int = 0

    def __post_init__(self):
        if self.status not in Status.OUTCOMES:
            raise ValueError(f"not an outcome status: {self.status!r}")
