"""Read-only numbers about workflows, for the admin's pages and the dashboard.

A workflow's status is derived from its jobs, its callbacks' jobs left out
(``lifecycle.workflows.derive_status`` and ``counts``); the row keeps the
last derived value (stored in the transaction that ends each of its jobs),
which the list filters on and the dashboard counts.
"""

from django.db.models import Count

from ..lifecycle.workflows import callback_ids, counts, derive_status
from ..models import Job, JobDependency, JobStatus, Workflow, WorkflowStatus

CHUNK = 1000


def graph(workflow):
    """Return ``(jobs, edges, callbacks)`` of a workflow.

    ``jobs``: ``[(id, task, status)]`` by id, its callbacks' jobs included;
    ``edges``: ``[(dependency id, dependent id)]`` between two of its jobs (a
    dependency outside it is shown on the job's own page); ``callbacks``: the
    ids of its callbacks' jobs.
    """
    jobs = list(Job.objects.filter(workflow_id=workflow.pk).order_by("pk").values_list("pk", "task", "status"))
    ids = [pk for pk, _, _ in jobs]
    members = set(ids)
    edges = []
    for start in range(0, len(ids), CHUNK):
        rows = (
            JobDependency.objects.filter(job_id__in=ids[start : start + CHUNK])
            .order_by("job_id", "depends_on_id")
            .values_list("depends_on_id", "job_id")
        )
        edges += [(dep, job) for dep, job in rows if dep in members]
    return jobs, edges, set(callback_ids(workflow)) & members


def statuses(workflows):
    """Return ``{workflow id: (derived status, {job status: count, every status})}`` for model instances, in one query."""
    found = {}
    for pk, n in counts(workflows).items():
        found[pk] = (derive_status(n), {**dict.fromkeys(JobStatus.values, 0), **n})
    return found


def dashboard_counts():
    """Return ``{"running": n, "failed": n}``: workflows running now, and those that failed (one query, the status index)."""
    found = dict(
        Workflow.objects.filter(status__in=(WorkflowStatus.RUNNING, WorkflowStatus.FAILED))
        .order_by()
        .values_list("status")
        .annotate(n=Count("pk"))
    )
    return {"running": found.get(WorkflowStatus.RUNNING, 0), "failed": found.get(WorkflowStatus.FAILED, 0)}
