"""The models: jobs, workflows, dispatchers (``Worker``), queues, schedules, the flow between jobs, and run records.

State changes never happen here: they live in ``scheduler_app.lifecycle``.
The QuerySets only select, and are named after states.
"""

from .audit import AuditEvent, ObjectType, Via
from .flow import JobDependency, QueueStart, UniqueWindow
from .jobs import ACTIVE_STATUSES, FINISHED_STATUSES, Dashboard, DependencyFailure, Job, JobQuerySet, JobStatus
from .observability import Counter, JobLog, Rollup, RollupCursor, Tallies
from .queues import Queue
from .schedules import MisfirePolicy, Schedule
from .workers import Leadership, Worker, WorkerQuerySet, WorkerState, stale_before
from .workflows import Workflow, WorkflowStatus

__all__ = [
    "AuditEvent",
    "ACTIVE_STATUSES",
    "FINISHED_STATUSES",
    "Counter",
    "Dashboard",
    "DependencyFailure",
    "Job",
    "JobDependency",
    "JobLog",
    "JobQuerySet",
    "JobStatus",
    "Leadership",
    "MisfirePolicy",
    "ObjectType",
    "Queue",
    "QueueStart",
    "Rollup",
    "RollupCursor",
    "Schedule",
    "Tallies",
    "UniqueWindow",
    "Via",
    "Worker",
    "WorkerQuerySet",
    "WorkerState",
    "Workflow",
    "WorkflowStatus",
    "stale_before",
]
