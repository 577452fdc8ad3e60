"""Which operator actions a job's status allows (the table: ``vocabulary.states``), and how a refusal is worded.

The compare-and-set UPDATEs of the lifecycle filter on these statuses; the
admin, the API and the commands show :class:`InvalidTransition`'s message
as it is (HTTP 409 in the API).
"""

import json

from django.core.exceptions import ValidationError

from ..models import JobStatus
from ..vocabulary.states import TRANSITIONS


def allowed_from(action):
    """Return the statuses the operator's ``action`` may start from (``vocabulary.states``)."""
    return tuple(JobStatus(s) for s in TRANSITIONS[action].sources)


def refusal(action, job_id, status):
    """Return the one wording of "``action`` is not allowed for job ``job_id`` in ``status``"."""
    statuses, done = allowed_from(action), TRANSITIONS[action].done
    names = [str(s) for s in statuses]
    names = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 2 else names)
    state = status or "gone"
    return f"Only {names} jobs can be {done}; job {job_id} is {state}."


class InvalidTransition(Exception):
    """The job is not in a state that allows the change (HTTP 409)."""

    def __init__(self, job_id, status, action, detail=""):
        self.job_id = job_id
        self.status = status
        self.action = action
        message = f"Cannot {action} job {job_id}: {detail}" if detail else refusal(action, job_id, status)
        super().__init__(message)


class BulkValidationError(ValidationError):
    """Some jobs of a bulk request are invalid; ``by_index`` maps index -> {field: [messages]}."""

    def __init__(self, by_index):
        self.by_index = by_index
        super().__init__({str(i): [json.dumps(e)] for i, e in by_index.items()})


class DependencyFailed(Exception):
    """Recorded as the reason of a job cancelled because a job it depends on failed or was cancelled."""


class SnoozedTooOften(Exception):
    """Recorded as the error of an attempt that snoozed past SCHEDULER["MAX_SNOOZES"]."""


class LeaseExpired(Exception):
    """Recorded as the error of an attempt whose dispatcher stopped renewing its lease."""


class ReleasedAtShutdown(Exception):
    """Recorded as the entry of an attempt handed back when its dispatcher stopped past its grace period (not counted)."""


class JobTimeout(Exception):
    """Recorded as the error of an attempt that ran past its timeout."""
