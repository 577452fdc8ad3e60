"""Changes people and code make to existing jobs and queues: cancel, retry, reschedule, run now, pause.

Each is a compare-and-set UPDATE on the statuses ``states.ALLOWED`` names
for it, and announces what it changed to the dispatchers on commit.
"""

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from ..models import FINISHED_STATUSES, Job, JobStatus, Queue
from .announce import announce
from .states import InvalidTransition, allowed_from
from .validation import EXECUTE_AT, PRIORITY, QUEUE


def _current_status(job_id, using):
    status = Job.objects.using(using).filter(pk=job_id).values_list("status", flat=True).first()
    if status is None:
        raise Job.DoesNotExist(f"Job {job_id} does not exist.")
    return status


def cancel(job_id, *, now=None, using="default"):
    """Cancel a job: pending ones at once, running ones cooperatively.

    Return "cancelled" or "cancel_requested". Raise InvalidTransition for a
    finished job, Job.DoesNotExist for an unknown one.
    """
    status = None
    for _ in range(3):
        now = now or timezone.now()
        jobs = Job.objects.using(using).filter(pk=job_id)
        with transaction.atomic(using=using):
            won = jobs.filter(status=JobStatus.PENDING).update(
                status=JobStatus.CANCELLED, finished_at=now, updated_at=now
            )
            if won:
                queue = jobs.values_list("queue", flat=True).first()
                announce(removed=[job_id], queues=[queue], using=using)
                return "cancelled"
        with transaction.atomic(using=using):
            if jobs.filter(status=JobStatus.RUNNING).update(cancel_requested=True, updated_at=now):
                announce(cancel=[job_id], using=using)
                return "cancel_requested"
        status = _current_status(job_id, using)
        if status in FINISHED_STATUSES:
            raise InvalidTransition(job_id, status, "cancel")
    raise InvalidTransition(job_id, status, "cancel", "it changed state during the cancel; try again.")


def cancel_many(job_ids, *, now=None, using="default"):
    """Cancel many jobs; return ``(cancelled, requested, skipped)`` counts."""
    now = now or timezone.now()
    job_ids = list(job_ids)
    jobs = Job.objects.using(using).filter(pk__in=job_ids)
    with transaction.atomic(using=using):
        pending = list(jobs.filter(status=JobStatus.PENDING).values_list("pk", "queue"))
        cancelled = jobs.filter(
            pk__in=[p for p, _ in pending], status=JobStatus.PENDING
        ).update(status=JobStatus.CANCELLED, finished_at=now, updated_at=now)
        if cancelled:
            announce(removed=[p for p, _ in pending], queues={q for _, q in pending}, using=using)
    running = list(
        jobs.filter(status=JobStatus.RUNNING, cancel_requested=False).values_list("pk", flat=True)
    )
    with transaction.atomic(using=using):
        requested = jobs.filter(pk__in=running, status=JobStatus.RUNNING).update(
            cancel_requested=True, updated_at=now
        )
        if requested:
            announce(cancel=running, using=using)
    return cancelled, requested, len(job_ids) - cancelled - requested


def retry(job_id, *, now=None, using="default"):
    """Put a failed or cancelled job back to pending, due now; keep its errors.

    A job that used all its attempts gets one more (as Oban does). Raise
    InvalidTransition when the job is not failed or cancelled, or when
    another active job now holds its unique_key.
    """
    now = now or timezone.now()
    jobs = Job.objects.using(using).filter(pk=job_id)
    try:
        with transaction.atomic(using=using):
            won = jobs.filter(status__in=allowed_from("retry")).update(
                status=JobStatus.PENDING,
                execute_at=now,
                max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
                cancel_requested=False,
                lease_expires_at=None,
                finished_at=None,
                result=None,
                updated_at=now,
            )
            if won:
                job = jobs.get()
                announce(jobs=[job], using=using)
                return job
    except IntegrityError:
        raise InvalidTransition(
            job_id, "", "retry", "another pending or running job holds its unique_key."
        ) from None
    raise InvalidTransition(job_id, _current_status(job_id, using), "retry")


def retry_many(job_ids, *, using="default"):
    """Retry each job that allows it; return ``(retried, skipped)``."""
    retried = 0
    job_ids = list(job_ids)
    for job_id in job_ids:
        try:
            retry(job_id, using=using)
            retried += 1
        except (InvalidTransition, Job.DoesNotExist):
            pass
    return retried, len(job_ids) - retried


def reschedule(job_id, *, execute_at=None, priority=None, now=None, using="default"):
    """Change when (and how urgently) a pending job runs; return the job.

    Raise ValidationError for bad values, InvalidTransition when the job is
    not pending.
    """
    changes = {}
    if execute_at is not None:
        changes["execute_at"] = EXECUTE_AT.check(execute_at)
    if priority is not None:
        changes["priority"] = PRIORITY.check(priority)
    jobs = Job.objects.using(using).filter(pk=job_id)
    with transaction.atomic(using=using):
        changes["updated_at"] = now or timezone.now()
        if jobs.filter(status__in=allowed_from("reschedule")).update(**changes):
            job = jobs.get()
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


def pause_queue(name, *, using="default"):
    return _set_paused(name, True, using)


def resume_queue(name, *, using="default"):
    return _set_paused(name, False, using)


def _set_paused(name, paused, using):
    QUEUE.check(name)
    now = timezone.now()
    with transaction.atomic(using=using):
        Queue.objects.using(using).update_or_create(
            name=name, defaults={"paused": paused, "updated_at": now}
        )
        announce(queues=[name], queues_changed=True, using=using)
    return paused


def paused_queues(using="default"):
    return set(Queue.objects.using(using).filter(paused=True).values_list("name", flat=True))
