"""A new job's ``depends_on``: which ids exist, the order within one call, where the job starts, results passed.

A job made with ``depends_on`` is ``waiting`` while any of its dependencies
has not succeeded (``dependencies_left`` counts them); one whose dependency
already failed or was cancelled is cancelled at birth, with an error that
names it (unless made with ``on_dependency_failure="run"``). What a
dependency's ending does later to its dependents is ``dependencies.settle``.

Cycles cannot arise: a job can only depend on jobs that exist when it is
made, or on other jobs of the same ``enqueue_many`` call, where the order
must be acyclic (``order``).
"""

from .. import sql
from ..models import DependencyFailure, Job, JobDependency, JobStatus
from .states import BulkValidationError

FAILED_ENDS = (JobStatus.FAILED, JobStatus.CANCELLED)


def unknown(ids, *, known=None, using="default"):
    """Return the error of each of ``ids`` that no job has; ``known``: the ids that exist, when looked up already.

    The one rule of ``depends_on``'s existence: a job's, a workflow
    callback's, the admin form's.
    """
    if known is None:
        known = set(Job.objects.using(using).filter(pk__in=list(ids)).values_list("pk", flat=True)) if ids else set()
    return [f"No job has the id {d}." for d in ids if d not in known]


def pass_results(job_ids, *, using="default"):
    """Prepend their dependencies' results to the ``args`` of the jobs of ``job_ids`` made with ``pass_results``.

    Once per job (``results_passed``): the result itself for one dependency,
    the list in ``depends_on`` order (the order the links were made) for
    several. A result is the stored JSON value. Run in the transaction that
    makes the jobs pending, so a claim finds them complete.
    """
    jobs = list(
        Job.objects.using(using)
        .filter(pk__in=list(job_ids), pass_results=True, results_passed=False, has_dependencies=True)
        .values_list("pk", "args")
    )
    if not jobs:
        return
    links = (
        JobDependency.objects.using(using)
        .filter(job_id__in=[pk for pk, _ in jobs])
        .order_by("job_id", "pk")
        .values_list("job_id", "depends_on__result")
    )
    results = {}
    for job_id, result in links:
        results.setdefault(job_id, []).append(result)
    changed = []
    for job_id, args in jobs:
        got = results.get(job_id, [])
        value = got[0] if len(got) == 1 else got
        changed.append(Job(pk=job_id, args=[value, *(args if isinstance(args, list) else [])], results_passed=True))
    Job.objects.using(using).bulk_update(changed, ["args", "results_passed"], batch_size=500)


def failure_reason(dependency_id, status):
    """Return the ``errors`` message of a job cancelled because of ``dependency_id`` (as the SQL words it)."""
    done = "failed" if status == JobStatus.FAILED else "was cancelled"
    return f"Cancelled: job {dependency_id} {done} and this job depends on it."


def order(depends_on_index):
    """Return the indexes of a bulk request in an order where each job comes after those it depends on.

    ``depends_on_index`` maps index -> indexes of the request it depends on
    (every index of the request is a key). Raise BulkValidationError
    ``{index: {"depends_on_index": [...]}}`` for an index outside the
    request, a job that depends on itself, or a cycle.
    """
    count = len(depends_on_index)
    errors = {}
    for index, wanted in depends_on_index.items():
        for other in wanted:
            if other == index:
                errors[index] = {"depends_on_index": ["A job cannot depend on itself."]}
            elif not 0 <= other < count:
                errors[index] = {"depends_on_index": [f"No job {other} in this request (indexes 0 to {count - 1})."]}
    if errors:
        raise BulkValidationError(errors)
    # Depth-first, with a stack of its own: a chain of 1,000 jobs is 1,000
    # levels deep, past what Python's recursion allows.
    done, placed = [], set()
    for start in range(count):
        if start in placed:
            continue
        path, on_path = [start], {start}
        pending = [iter(depends_on_index[start])]
        while pending:
            index = next(pending[-1], None)
            if index is None:  # all of path[-1]'s dependencies are placed
                pending.pop()
                node = path.pop()
                on_path.discard(node)
                placed.add(node)
                done.append(node)
            elif index in on_path:
                cycle = path[path.index(index) :] + [index]
                chain = " -> ".join(str(i) for i in cycle)
                raise BulkValidationError(
                    {index: {"depends_on_index": [f"Jobs {chain} of this request depend on each other in a cycle."]}}
                )
            elif index not in placed:
                path.append(index)
                on_path.add(index)
                pending.append(iter(depends_on_index[index]))
    return done


def start_state(job, statuses):
    """Set a new job's status from its dependencies' ``statuses`` (``(dependency, status)`` pairs).

    Succeeded ones are done; a failed or cancelled one cancels the job at
    once (as it would have, had the job existed before it ended), unless
    the job runs anyway; any other status is one more to wait for. Return
    the ``(dependency, status)`` that cancelled the job, or None.
    """
    left = 0
    for dependency, status in statuses:
        if status == JobStatus.SUCCEEDED:
            continue
        if status in FAILED_ENDS:
            if job.on_dependency_failure == DependencyFailure.RUN:
                continue
            job.status = JobStatus.CANCELLED
            job.finished_at = job.created_at
            return dependency, status
        left += 1
    job.dependencies_left = left
    job.status = JobStatus.WAITING if left else JobStatus.PENDING
    return None


def record_failure(job, dependency_id, status):
    """Give a job cancelled at birth the ``errors`` entry that names its dependency."""
    job.errors = [
        {
            "attempt": 0,
            "time": job.created_at.isoformat(),
            "worker": "",
            "exception_class": sql.DEPENDENCY_FAILED_CLASS,
            "message": failure_reason(dependency_id, status),
            "traceback": "",
        }
    ]
