"""The job service: every state change of a job happens here, and only here.

Each transition is one conditional UPDATE (compare-and-set) on the state it
expects, and reports whether it won. The admin, the API, the django.tasks
backend, the management commands and the dispatcher all call this package:

- ``validation``: what a valid job is (one rule per field) and ``build_job``;
- ``creation``: create jobs, one or many (``enqueue``, ``enqueue_many``, ``enqueue_many_created``);
- ``actions``: cancel, retry, reschedule, run now;
- ``bulk``: cancel or retry every job a filter matches, in bounded batches;
- ``queues``: queue rows (seeded from settings), pause and resume, limits;
- ``dependencies``: where a job with dependencies starts, and what a finished
  dependency does to its dependents;
- ``transitions``: the dispatcher's claim, finish, lease renewal, rescue, release;
- ``retention``: pruning of finished jobs;
- ``audit``: the audit trail's one writer (``audit.record``: who did what, through which door);
- ``expiry``: the sweep that ends expired jobs cancelled;
- ``announce``: the wake-up message sent to dispatchers on commit;
- ``states``: which status allows which change, and the refusal's wording;
- ``workflows``: a workflow's status (``derive_status``: the one rule), its
  callbacks, retrying and cancelling a workflow as a whole.
"""

from ..validation.errors import error_text
from . import audit
from .actions import cancel, cancel_many, reschedule, retry, retry_many, run_now_many
from .announce import announce, announce_schedules, tell_others
from .building import build_job
from .bulk import cancel_matching, retry_matching
from .creation import enqueue, enqueue_many, enqueue_many_created
from .expiry import expire_due
from .finishing import finish
from .queues import ensure as ensure_queues
from .queues import limited_queues, pause_queue, paused_queues, resume_queue, set_limits
from .retention import prune
from .states import (
    BulkValidationError,
    DependencyFailed,
    InvalidTransition,
    JobTimeout,
    LeaseExpired,
    ReleasedAtShutdown,
    SnoozedTooOften,
)
from .transitions import claim, release, renew_leases, rescue_expired, set_progress, take_back
from .workflows import cancel_workflow, derive_status, retry_workflow, workflow_of

__all__ = [
    "BulkValidationError",
    "DependencyFailed",
    "InvalidTransition",
    "JobTimeout",
    "LeaseExpired",
    "ReleasedAtShutdown",
    "SnoozedTooOften",
    "announce",
    "audit",
    "announce_schedules",
    "build_job",
    "cancel",
    "cancel_many",
    "cancel_workflow",
    "cancel_matching",
    "claim",
    "derive_status",
    "enqueue",
    "enqueue_many",
    "enqueue_many_created",
    "ensure_queues",
    "error_text",
    "expire_due",
    "finish",
    "limited_queues",
    "pause_queue",
    "paused_queues",
    "prune",
    "release",
    "renew_leases",
    "reschedule",
    "rescue_expired",
    "take_back",
    "resume_queue",
    "retry",
    "retry_many",
    "retry_workflow",
    "retry_matching",
    "run_now_many",
    "set_limits",
    "set_progress",
    "tell_others",
    "workflow_of",
]
