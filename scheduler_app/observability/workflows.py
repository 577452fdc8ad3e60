"""Read-only numbers about workflows, for the admin's pages and the dashboard.

A workflow's status is derived from its jobs (``lifecycle.workflows.derive_status``);
the row keeps the last derived value, which the lists filter on.
"""

from collections import defaultdict

from django.db.models import Count

from ..lifecycle.workflows import counts as job_counts
from ..lifecycle.workflows import derive_status
from ..models import Job, JobDependency, JobStatus, Workflow, WorkflowStatus

CHUNK = 1000
UNFINISHED = (WorkflowStatus.PENDING, WorkflowStatus.RUNNING)


def graph(workflow_id):
    """Return ``(jobs, edges)`` of a workflow: ``[(id, task, status)]`` by id, ``[(dependency id, dependent id)]``.

    Only edges between two jobs of the workflow (a dependency outside it is
    shown on the job's own page).
    """
    jobs = list(Job.objects.filter(workflow_id=workflow_id).order_by("pk").values_list("pk", "task", "status"))
    ids = [pk for pk, _, _ in jobs]
    members = set(ids)
    edges = []
    for start in range(0, len(ids), CHUNK):
        rows = (
            JobDependency.objects.filter(job_id__in=ids[start : start + CHUNK])
            .order_by("job_id", "depends_on_id").values_list("depends_on_id", "job_id")
        )
        edges += [(dep, job) for dep, job in rows if dep in members]
    return jobs, edges


def statuses(workflows):
    """Return ``{workflow id: (derived status, {job status: count})}`` for model instances, in one query."""
    counts = job_counts(workflows)
    return {pk: (derive_status(n), dict.fromkeys(JobStatus.values, 0) | n) for pk, n in counts.items()}


def dashboard_counts():
    """Return ``{"running": n, "failed": n}``: workflows running now, and those that failed. Two queries.

    Failed: the rows stored failed, and the unfinished ones whose jobs say
    failed already; running: the unfinished ones whose jobs say running.
    Only the jobs of unfinished workflows are read (through the workflow index).
    """
    failed = Workflow.objects.filter(status=WorkflowStatus.FAILED).count()
    counts = defaultdict(dict)
    rows = (
        Job.objects.filter(workflow__status__in=UNFINISHED).order_by()
        .values_list("workflow_id", "status").annotate(n=Count("id"))
    )
    for workflow_id, status, n in rows:
        counts[workflow_id][status] = n
    derived = [derive_status(n) for n in counts.values()]
    return {
        "running": derived.count(WorkflowStatus.RUNNING),
        "failed": failed + derived.count(WorkflowStatus.FAILED),
    }
