"""Changes people and code make to existing jobs and workflows: cancel, retry, reschedule, run now.

Each is a compare-and-set UPDATE on the statuses ``vocabulary.states`` names
for it, and announces what it changed to the dispatchers on commit. A job
that ends here (a cancel) settles its dependents in the same transaction.
"""

from django.db import IntegrityError, transaction
from django.db.models import Case, DateTimeField, F, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from .. import sql
from ..models import FINISHED_STATUSES, DependencyFailure, Job, JobDependency, JobStatus, Workflow
from ..validation.errors import Errors
from ..validation.fields import PRIORITY
from ..vocabulary.bounds import LATEST
from .announce import announce
from .building import due_at
from .dependencies import settle
from .depends_on import FAILED_ENDS, pass_results
from .states import InvalidTransition, allowed_from
from .workflows import ACTIVE, members, refresh

# A pending or waiting job is cancelled at once.
NOT_STARTED = (JobStatus.PENDING, JobStatus.WAITING)


def _current_status(job_id, using):
    status = Job.objects.using(using).filter(pk=job_id).values_list("status", flat=True).first()
    if status is None:
        raise Job.DoesNotExist(f"Job {job_id} does not exist.")
    return status


def cancel(job_id, *, now=None, using="default"):
    """Cancel a job: pending and waiting ones at once, running ones cooperatively.

    Return "cancelled" or "cancel_requested". Raise InvalidTransition for a
    finished job, Job.DoesNotExist for an unknown one. The jobs that depend
    on a job cancelled here are cancelled too (or run anyway, if made so).
    """
    status = None
    for _ in range(3):
        now = now or timezone.now()
        jobs = Job.objects.using(using).filter(pk=job_id)
        with transaction.atomic(using=using):
            won = jobs.filter(status__in=NOT_STARTED).update(
                status=JobStatus.CANCELLED, finished_at=now, updated_at=now
            )
            if won:
                # A statement after the UPDATE: it sees any dependent made before the row was ours.
                queue, has_dependents = jobs.values_list("queue", "has_dependents").first()
                announce(removed=[job_id], queues=[queue], using=using)
                if has_dependents:
                    settle({job_id: JobStatus.CANCELLED}, now=now, using=using)
                return "cancelled"
        with transaction.atomic(using=using):
            if jobs.filter(status=JobStatus.RUNNING).update(cancel_requested=True, updated_at=now):
                announce(cancel=[job_id], using=using)
                return "cancel_requested"
        status = _current_status(job_id, using)
        if status in FINISHED_STATUSES:
            raise InvalidTransition(job_id, status, "cancel")
    raise InvalidTransition(job_id, status, "cancel", "it changed state during the cancel; try again.")


def cancel_many(job_ids, *, now=None, using="default", within=None):
    """Cancel many jobs; return ``(cancelled, requested, skipped)`` counts.

    ``within`` (a queryset: a filter) is part of every compare-and-set: a
    job that no longer matches it when its row is locked is left alone.
    """
    now = now or timezone.now()
    job_ids = list(job_ids)
    jobs = (Job.objects.using(using) if within is None else within.order_by()).filter(pk__in=job_ids)
    with transaction.atomic(using=using):
        # Locked (PostgreSQL; SQLite's writers take turns): the UPDATE wins for each row read.
        rows = list(
            jobs.filter(status__in=NOT_STARTED)
            .select_for_update(of=("self",))
            .order_by("pk")
            .values_list("pk", "queue", "has_dependents")
        )
        cancelled = (
            Job.objects.using(using)
            .filter(pk__in=[p for p, _, _ in rows])
            .update(status=JobStatus.CANCELLED, finished_at=now, updated_at=now)
        )
        if cancelled:
            announce(removed=[p for p, _, _ in rows], queues={q for _, q, _ in rows}, using=using)
            settle({p: JobStatus.CANCELLED for p, _, has in rows if has}, now=now, using=using)
    running = list(jobs.filter(status=JobStatus.RUNNING, cancel_requested=False).values_list("pk", flat=True))
    with transaction.atomic(using=using):
        requested = jobs.filter(pk__in=running, status=JobStatus.RUNNING, cancel_requested=False).update(
            cancel_requested=True, updated_at=now
        )
        if requested:
            announce(cancel=running, using=using)
    return cancelled, requested, len(job_ids) - cancelled - requested


def _kept_or(now):
    """The job's own execute_at when it is a time still ahead, else ``now`` (a row whose time no one
    can read too: SQLite text that is no time compares above LATEST's)."""
    return Case(
        When(execute_at__gt=now, execute_at__lte=LATEST, then=F("execute_at")),
        default=Value(now, output_field=DateTimeField()),
        output_field=DateTimeField(),
    )


def retried(now, *, run_now=False):
    """Return the columns a retry sets (besides ``status`` and ``dependencies_left``): one more attempt if needed,
    and due now, or at its own time when that is still ahead (a job cancelled before its time keeps it), unless
    ``run_now``: the one rule of a retry's time, for the admin and the API."""
    return {
        "execute_at": now if run_now else _kept_or(now),
        "max_attempts": Greatest(F("max_attempts"), F("attempts") + 1),
        "cancel_requested": False,
        "lease_expires_at": None,
        "finished_at": None,
        "result": None,
        "updated_at": now,
    }


def retry(job_id, *, now=None, using="default", within=None, run_now=False):
    """Put a failed or cancelled job back to pending, due now (or at its own time, still ahead, unless
    ``run_now``: ``retried``); keep its errors.

    A job that used all its attempts gets one more (as Oban does). A job
    with dependencies waits again for those that have not succeeded. Raise
    InvalidTransition when the job is not failed or cancelled, when another
    active job now holds its unique_key, or when a dependency failed or was
    cancelled (retry that one first). A job of a workflow brings the
    workflow's status up to date; its callbacks, if they ran, do not run
    again (``retry_workflow`` retries a workflow as a whole, and
    they run again when it ends again). ``within`` (a queryset: a filter) is
    part of the compare-and-set: a job that no longer matches it is refused.
    """
    now = now or timezone.now()
    jobs = Job.objects.using(using).filter(pk=job_id)
    target = jobs if within is None else within.order_by().filter(pk=job_id)
    try:
        with transaction.atomic(using=using):
            found = jobs.values_list("has_dependencies", "on_dependency_failure").first()
            if found is None:
                raise Job.DoesNotExist(f"Job {job_id} does not exist.")
            left = _dependencies_left(job_id, *found, using=using)
            won = target.filter(status__in=allowed_from("retry")).update(
                status=JobStatus.WAITING if left else JobStatus.PENDING,
                dependencies_left=left,
                **retried(now, run_now=run_now),
            )
            if won:
                if not left:
                    pass_results([job_id], using=using)
                job = jobs.get()
                if job.status == JobStatus.PENDING:
                    announce(jobs=[job], using=using)
                if job.workflow_id is not None:
                    refresh(job.workflow_id, now=now, using=using)
                return job
    except IntegrityError:
        raise InvalidTransition(
            job_id, "", "retry", "another pending, waiting or running job holds its unique_key."
        ) from None
    raise InvalidTransition(job_id, _current_status(job_id, using), "retry")


def _dependencies_left(job_id, has_dependencies, on_failure, *, using):
    """Return how many of a retried job's dependencies it must wait for (they are locked until commit)."""
    if not has_dependencies:
        return 0
    ids = JobDependency.objects.using(using).filter(job_id=job_id).values_list("depends_on_id", flat=True)
    statuses = sql.mark_dependencies(list(ids), using=using)
    for dependency_id, status in sorted(statuses.items()):
        if status in FAILED_ENDS and on_failure == DependencyFailure.CANCEL:
            raise InvalidTransition(
                job_id, "", "retry", f"job {dependency_id}, which it depends on, is {status}; retry that one first."
            )
    return sum(1 for status in statuses.values() if status not in (JobStatus.SUCCEEDED, *FAILED_ENDS))


def retry_many(job_ids, *, using="default", run_now=False):
    """Retry each job that allows it; return ``(retried, skipped)``."""
    retried = 0
    job_ids = list(job_ids)
    for job_id in job_ids:
        try:
            retry(job_id, using=using, run_now=run_now)
            retried += 1
        except (InvalidTransition, Job.DoesNotExist):
            pass
    return retried, len(job_ids) - retried


def reschedule(job_id, *, execute_at=None, delay=None, priority=None, now=None, using="default"):
    """Change when (and how urgently) a pending job runs; return the job.

    When: ``execute_at``, or ``delay`` (a duration: seconds or "5m") from
    now, as a new job's. Raise ValidationError for bad values,
    InvalidTransition when the job is not pending.
    """
    changes = {}
    now = now or timezone.now()
    if execute_at is not None or delay is not None:
        errors = Errors()
        changes["execute_at"] = due_at(errors, execute_at, delay, now)
        errors.raise_if_any()
    if priority is not None:
        changes["priority"] = PRIORITY.check(priority)
    jobs = Job.objects.using(using).filter(pk=job_id)
    with transaction.atomic(using=using):
        changes["updated_at"] = now
        if jobs.filter(status__in=allowed_from("reschedule")).update(**changes):
            job = jobs.get()
            if job.status == JobStatus.PENDING:  # a waiting job is not in any dispatcher's window
                announce(jobs=[job], using=using)
            return job
    raise InvalidTransition(job_id, _current_status(job_id, using), "reschedule")


def run_now_many(job_ids, *, now=None, using="default"):
    """Make pending jobs due now; return ``(changed, skipped)``."""
    now = now or timezone.now()
    job_ids = list(job_ids)
    jobs = Job.objects.using(using).filter(pk__in=job_ids, status__in=allowed_from("run now"))
    with transaction.atomic(using=using):
        changed = jobs.update(execute_at=now, updated_at=now)
        if changed:
            announce(jobs=list(Job.objects.using(using).filter(pk__in=job_ids).pending()), using=using)
    return changed, len(job_ids) - changed


def cancel_workflow(workflow_id, *, now=None, using="default"):
    """Cancel every job of a workflow that has not ended (running ones cooperatively); return the workflow."""
    workflow = Workflow.objects.using(using).get(pk=workflow_id)
    active = list(members(workflow, using=using).filter(status__in=ACTIVE).values_list("pk", flat=True))
    if active:
        cancel_many(active, now=now, using=using)
    return refresh(workflow_id, now=now, using=using)


def retry_workflow(workflow_id, *, now=None, using="default"):
    """Retry a workflow's jobs that failed or were cancelled; return the workflow.

    Each such job waits again for those of its dependencies that have not
    succeeded (the ones retried here among them), or is pending at once;
    so the dependents cancelled because of a failure come back to
    ``waiting``. Their ``errors`` keep what happened; a job that used all
    its attempts gets one more. The workflow runs again and its callbacks
    are enqueued (once) when it ends again. Raise InvalidTransition when a
    job it depends on outside the workflow failed, or a unique key is held.
    """
    now = now or timezone.now()
    try:
        with transaction.atomic(using=using):
            workflow = Workflow.objects.using(using).get(pk=workflow_id)
            chosen = dict(
                members(workflow, using=using)
                .filter(status__in=(JobStatus.FAILED, JobStatus.CANCELLED))
                .select_for_update()
                .order_by("pk")
                .values_list("pk", "pass_results")
            )
            if not chosen:
                return refresh(workflow_id, now=now, using=using)
            left = _workflow_dependencies_left(chosen, using)
            _revive(chosen, left, now, using)
            Workflow.objects.using(using).filter(pk=workflow_id).update(callbacks_enqueued_at=None)
            return refresh(workflow_id, now=now, using=using)
    except IntegrityError:
        refused = InvalidTransition(workflow_id, "", "retry")
        refused.args = (f"Cannot retry workflow {workflow_id}: another active job holds a unique_key of its jobs.",)
        raise refused from None


def _workflow_dependencies_left(chosen, using):
    """Return ``{job id: dependencies it waits for}`` of the jobs ``chosen`` to be retried, their dependencies locked."""
    links = list(
        JobDependency.objects.using(using).filter(job_id__in=list(chosen)).values_list("job_id", "depends_on_id")
    )
    outside = sql.mark_dependencies({d for _, d in links if d not in chosen}, using=using)
    left = dict.fromkeys(chosen, 0)
    for job_id, dependency in links:
        if dependency in chosen:
            left[job_id] += 1
        elif outside.get(dependency) in (JobStatus.FAILED, JobStatus.CANCELLED):
            raise InvalidTransition(
                job_id,
                "",
                "retry",
                f"job {dependency}, which it depends on, is {outside[dependency]}; retry that one first.",
            )
        elif outside.get(dependency) != JobStatus.SUCCEEDED:
            left[job_id] += 1
    return left


def _revive(chosen, left, now, using):
    """Put the ``chosen`` jobs back: waiting for ``left`` dependencies, or pending (compare-and-set on their status)."""
    by_count = {}
    for job_id, n in left.items():
        by_count.setdefault(n, []).append(job_id)
    for n, ids in sorted(by_count.items()):
        Job.objects.using(using).filter(pk__in=ids, status__in=(JobStatus.FAILED, JobStatus.CANCELLED)).update(
            status=JobStatus.WAITING if n else JobStatus.PENDING,
            dependencies_left=n,
            execute_at=now,
            max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
            cancel_requested=False,
            lease_expires_at=None,
            finished_at=None,
            result=None,
            updated_at=now,
        )
    pending = by_count.get(0, [])
    if pending:
        pass_results([pk for pk in pending if chosen[pk]], using=using)
        announce(jobs=list(Job.objects.using(using).filter(pk__in=pending, status=JobStatus.PENDING)), using=using)
