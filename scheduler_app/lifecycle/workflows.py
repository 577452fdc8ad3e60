"""A workflow's jobs as a whole: its status derived from them, and retry or cancel of all of them.

The admin's side of issue 25 needs these before the engine lands; they have
the names, signatures and rule of the engine's module (branch h-wf-core:
``derive_status``, ``counts``, ``statuses``, ``members``, ``callback_ids``,
``refresh``, ``retry_workflow(workflow_id)``, ``cancel_workflow(workflow_id)``,
both returning the workflow), so at the merge the engine's module replaces
this one and the admin keeps working. What this one does not do: enqueue
callbacks (the engine's ``refresh`` does, once, in the transaction that ends
the last job).

``retry_workflow`` retries, in one transaction, every job of a workflow that
failed or was cancelled, in the order of their dependencies, through the
job's own ``retry`` (a compare-and-set on failed/cancelled; the errors stay):
a failed job comes back ``pending``, and a dependent cancelled because of it
comes back ``waiting`` for it, since by then its dependency is active again.
All or nothing: a job ``retry`` refuses (its unique key held again, a
dependency outside the workflow failed) refuses the whole retry.
``cancel_workflow`` cancels every active job through ``cancel_many``.
"""

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from ..models import Job, JobDependency, JobStatus, Workflow, WorkflowStatus
from .actions import cancel_many, retry

ACTIVE = (JobStatus.PENDING, JobStatus.WAITING, JobStatus.RUNNING)
ENDED = (WorkflowStatus.SUCCEEDED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)
CHUNK = 1000


def derive_status(counts):
    """Return a workflow's status from ``{job status: how many of its jobs}``: the one rule.

    ``pending`` until one of its jobs runs or ends; ``running`` while any is
    pending, waiting or running; then ``failed`` if any failed, else
    ``cancelled`` if any was cancelled, else ``succeeded`` (a workflow
    without jobs too).
    """
    active = sum(counts.get(s, 0) for s in ACTIVE)
    ended = sum(n for s, n in counts.items() if s not in ACTIVE)
    if active:
        return WorkflowStatus.RUNNING if counts.get(JobStatus.RUNNING) or ended else WorkflowStatus.PENDING
    if counts.get(JobStatus.FAILED):
        return WorkflowStatus.FAILED
    if counts.get(JobStatus.CANCELLED):
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.SUCCEEDED


def callback_ids(workflow):
    """Return the ids of the jobs enqueued as ``workflow``'s callbacks (``callbacks["enqueued"]``)."""
    entries = (workflow.callbacks or {}).get("enqueued") if isinstance(workflow.callbacks, dict) else None
    return [e["job"] for e in entries or () if isinstance(e, dict) and isinstance(e.get("job"), int)]


def members(workflow, *, using="default"):
    """Return the QuerySet of ``workflow``'s jobs, its callbacks' jobs left out."""
    return Job.objects.using(using).filter(workflow_id=workflow.pk).exclude(pk__in=callback_ids(workflow))


def counts(workflows, *, using="default"):
    """Return ``{workflow id: {job status: count}}`` of ``workflows``' jobs (callbacks left out), one query."""
    workflows = list(workflows)
    if not workflows:
        return {}
    left_out = [pk for w in workflows for pk in callback_ids(w)]
    rows = (
        Job.objects.using(using)
        .filter(workflow_id__in=[w.pk for w in workflows])
        .exclude(pk__in=left_out)
        .order_by()
        .values_list("workflow_id", "status")
        .annotate(n=Count("pk"))
    )
    found = {w.pk: {} for w in workflows}
    for workflow_id, status, n in rows:
        found[workflow_id][status] = n
    return found


def statuses(workflows, *, using="default"):
    """Return ``{workflow id: status}`` derived now from the jobs (one query)."""
    return {pk: derive_status(c) for pk, c in counts(workflows, using=using).items()}


def refresh(workflow_id, *, now=None, using="default"):
    """Store the status derived from the jobs (the row locked, then counted); return the workflow, or None."""
    now = now or timezone.now()
    with transaction.atomic(using=using):
        workflow = Workflow.objects.using(using).select_for_update().filter(pk=workflow_id).first()
        if workflow is None:
            return None
        status = statuses([workflow], using=using)[workflow.pk]
        changes = {"status": status, "updated_at": now, "finished_at": now if status in ENDED else None}
        Workflow.objects.using(using).filter(pk=workflow.pk).update(**changes)
        for field, value in changes.items():
            setattr(workflow, field, value)
    return workflow


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
    ready = sorted((pk for pk, deps in waits_on.items() if not deps), reverse=True)
    ordered = []
    while ready:
        pk = ready.pop()
        ordered.append(pk)
        for other in dependents[pk]:
            waits_on[other].discard(pk)
            if not waits_on[other]:
                ready.append(other)
    return ordered + sorted(ids.difference(ordered))  # a cycle cannot arise; keep any leftover anyway


def retry_workflow(workflow_id, *, now=None, using="default"):
    """Retry a workflow's jobs that failed or were cancelled; return the workflow.

    One transaction, all or nothing: raise InvalidTransition (and change
    nothing) when ``retry`` refuses one of them; Workflow.DoesNotExist for an
    unknown id. The workflow runs again; its callbacks are due again when it ends.
    """
    now = now or timezone.now()
    with transaction.atomic(using=using):
        workflow = Workflow.objects.using(using).get(pk=workflow_id)
        ended = list(
            members(workflow, using=using).filter(status__in=(JobStatus.FAILED, JobStatus.CANCELLED))
            .order_by("pk").values_list("pk", flat=True)
        )
        for job_id in _in_dependency_order(ended, using=using):
            retry(job_id, now=now, using=using)
        if ended:
            Workflow.objects.using(using).filter(pk=workflow_id).update(callbacks_enqueued_at=None)
        return refresh(workflow_id, now=now, using=using)


def cancel_workflow(workflow_id, *, now=None, using="default"):
    """Cancel every job of a workflow that has not ended (running ones cooperatively); return the workflow."""
    workflow = Workflow.objects.using(using).get(pk=workflow_id)
    active = list(members(workflow, using=using).filter(status__in=ACTIVE).order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(active), CHUNK):
        cancel_many(active[start : start + CHUNK], now=now, using=using)
    return refresh(workflow_id, now=now, using=using)
