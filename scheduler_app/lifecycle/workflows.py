"""A workflow's jobs as a whole: its status derived from them, and retry or cancel of all of them.

``retry_workflow`` retries, in one transaction, every job of a workflow that
failed or was cancelled, in the order of their dependencies, through the
job's own ``retry`` (a compare-and-set on failed/cancelled; the errors stay):
a failed job comes back ``pending``, and a dependent cancelled because of it
comes back ``waiting`` for it, since by then its dependency is active again.
``cancel_workflow`` cancels every active job through ``cancel_many`` (pending
and waiting ones at once, running ones cooperatively). Both then store the
status derived from the jobs (a compare-and-set on the stored one).
"""

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from ..models import ACTIVE_STATUSES, Job, JobDependency, JobStatus, Workflow, WorkflowStatus
from .actions import cancel_many, retry
from .states import InvalidTransition

FINISHED_WORKFLOW = (WorkflowStatus.SUCCEEDED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)
CHUNK = 1000


def derived_status(counts):
    """Return a workflow's status from its jobs' ``{status: count}``.

    Active jobs left: ``running`` once any job started (or ended), else
    ``pending``. All ended: ``failed`` if any failed, else ``cancelled`` if
    any was cancelled, else ``succeeded``. No jobs: ``pending``.
    """
    n = {status: counts.get(status, 0) for status in JobStatus.values}
    if not any(n.values()):
        return WorkflowStatus.PENDING
    if n[JobStatus.PENDING] or n[JobStatus.WAITING] or n[JobStatus.RUNNING]:
        started = n[JobStatus.RUNNING] + n[JobStatus.SUCCEEDED] + n[JobStatus.FAILED] + n[JobStatus.CANCELLED]
        return WorkflowStatus.RUNNING if started else WorkflowStatus.PENDING
    if n[JobStatus.FAILED]:
        return WorkflowStatus.FAILED
    if n[JobStatus.CANCELLED]:
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.SUCCEEDED


def job_counts(workflow_ids, *, using="default"):
    """Return ``{workflow id: {job status: count}}`` (every status, zeros included) in one query."""
    counts = {pk: dict.fromkeys(JobStatus.values, 0) for pk in workflow_ids}
    if counts:
        rows = (
            Job.objects.using(using).filter(workflow_id__in=list(counts)).order_by()
            .values_list("workflow_id", "status").annotate(n=Count("id"))
        )
        for workflow_id, status, n in rows:
            counts[workflow_id][status] = n
    return counts


def store_status(workflow_id, *, now=None, using="default"):
    """Store the status derived from the jobs (compare-and-set on the stored one); return it."""
    now = now or timezone.now()
    status = derived_status(job_counts([workflow_id], using=using)[workflow_id])
    rows = Workflow.objects.using(using).filter(pk=workflow_id)
    stored = rows.values_list("status", flat=True).first()
    if stored is not None and stored != status:
        finished_at = now if status in FINISHED_WORKFLOW else None
        rows.filter(status=stored).update(status=status, updated_at=now, finished_at=finished_at)
    return status


def _in_dependency_order(job_ids, *, using):
    """Return ``job_ids`` so that each comes after those of them it depends on (Kahn's order, no recursion)."""
    ids = set(job_ids)
    waits_on = {pk: set() for pk in ids}
    dependents = {pk: [] for pk in ids}
    for start in range(0, len(job_ids), CHUNK):
        chunk = job_ids[start : start + CHUNK]
        edges = JobDependency.objects.using(using).filter(job_id__in=chunk).values_list("job_id", "depends_on_id")
        for job_id, depends_on_id in edges:
            if depends_on_id in ids:
                waits_on[job_id].add(depends_on_id)
                dependents[depends_on_id].append(job_id)
    ready = sorted(pk for pk, deps in waits_on.items() if not deps)
    ordered = []
    while ready:
        pk = ready.pop()
        ordered.append(pk)
        for other in dependents[pk]:
            waits_on[other].discard(pk)
            if not waits_on[other]:
                ready.append(other)
    return ordered + sorted(ids.difference(ordered))  # a cycle cannot arise; keep any leftover anyway


def _workflow_id(workflow):
    return workflow.pk if isinstance(workflow, Workflow) else int(workflow)


def retry_workflow(workflow, user=None, *, now=None, using="default"):
    """Retry every failed or cancelled job of ``workflow``; return ``{"retried": n, "skipped": n, "status": ...}``.

    One transaction: failed and cancelled jobs come back pending (or waiting
    for a dependency retried before them), their errors kept; a job ``retry``
    refuses (its unique key taken again) is skipped, and so are its dependents.
    """
    workflow_id = _workflow_id(workflow)
    now = now or timezone.now()
    with transaction.atomic(using=using):
        ended = list(
            Job.objects.using(using).filter(workflow_id=workflow_id, status__in=(JobStatus.FAILED, JobStatus.CANCELLED))
            .order_by("pk").values_list("pk", flat=True)
        )
        retried = 0
        for job_id in _in_dependency_order(ended, using=using):
            try:
                retry(job_id, now=now, using=using)
                retried += 1
            except (InvalidTransition, Job.DoesNotExist):
                pass
        status = store_status(workflow_id, now=now, using=using)
    return {"retried": retried, "skipped": len(ended) - retried, "status": status}


def cancel_workflow(workflow, user=None, *, now=None, using="default"):
    """Cancel every active job of ``workflow``; return ``{"cancelled", "cancel_requested", "skipped", "status"}``.

    Pending and waiting jobs end cancelled at once; running ones are asked to
    stop (cooperative cancel), as ``cancel_many`` does for any job.
    """
    workflow_id = _workflow_id(workflow)
    now = now or timezone.now()
    totals = [0, 0, 0]
    with transaction.atomic(using=using):
        active = list(
            Job.objects.using(using).filter(workflow_id=workflow_id, status__in=ACTIVE_STATUSES)
            .order_by("pk").values_list("pk", flat=True)
        )
        for start in range(0, len(active), CHUNK):
            for i, n in enumerate(cancel_many(active[start : start + CHUNK], now=now, using=using)):
                totals[i] += n
        status = store_status(workflow_id, now=now, using=using)
    cancelled, requested, skipped = totals
    return {"cancelled": cancelled, "cancel_requested": requested, "skipped": skipped, "status": status}
