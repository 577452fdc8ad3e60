"""Every job a filter matches, cancelled or retried: in bounded batches, each a compare-and-set.

``jobs`` is a queryset (the API's ``JobFilter``, the admin's change list):
ids are taken by keyset (``id > last``, ``BULK_BATCH`` at a time), and each
batch is one short transaction whose statements repeat the filter and the
statuses the action starts from (``vocabulary.states``). A job that changed
meanwhile (finished, started, rescheduled out of the filter) is left alone;
no request holds a lock longer than one batch takes.

A cancel is ``actions.cancel_many`` (pending and waiting jobs cancelled,
their dependents settled as any cancel settles them; running ones asked to
stop). A retry of a job with no dependencies and no unique key is one
UPDATE per batch (``actions.retried``: the columns a retry sets); the
others go one by one through ``actions.retry``, which keeps their rules
(dependencies waited for, a unique key another job took).
"""

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..models import Job, JobStatus
from ..vocabulary.bounds import BULK_BATCH, LATEST
from .actions import cancel_many, retried, retry
from .announce import announce
from .states import InvalidTransition, allowed_from


def batches(jobs, statuses, size=BULK_BATCH):
    """Yield lists of at most ``size`` ids of ``jobs`` in ``statuses``, by ascending id (keyset: no OFFSET)."""
    candidates = jobs.order_by().filter(status__in=statuses)
    last = 0
    while True:
        ids = list(candidates.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:size])
        if not ids:
            return
        yield ids
        last = ids[-1]


def cancel_matching(jobs, *, size=BULK_BATCH, now=None):
    """Cancel every job of ``jobs`` that a cancel applies to; return ``(cancelled, cancel_requested)``.

    ``cancelled`` counts pending and waiting jobs now cancelled (their
    dependents settled), ``cancel_requested`` running jobs asked to stop.
    """
    cancelled = requested = 0
    for ids in batches(jobs, allowed_from("cancel"), size):
        c, r, _ = cancel_many(ids, now=now, using=jobs.db, within=jobs)
        cancelled, requested = cancelled + c, requested + r
    return cancelled, requested


def retry_matching(jobs, *, size=BULK_BATCH, now=None, run_now=False):
    """Retry every failed or cancelled job of ``jobs`` (at its own time if still ahead, unless ``run_now``:
    ``actions.retried``); return how many were retried."""
    done = 0
    for ids in batches(jobs, allowed_from("retry"), size):
        done += _retry_batch(jobs, ids, now or timezone.now(), run_now)
    return done


def _retry_batch(jobs, ids, now, run_now):
    using = jobs.db
    batch = jobs.order_by().filter(pk__in=ids, status__in=allowed_from("retry"))
    plain = Q(has_dependencies=False, unique_key__isnull=True)
    with transaction.atomic(using=using):
        rows = list(
            batch.filter(plain).select_for_update(of=("self",)).values_list("pk", "priority", "queue", "execute_at")
        )
        won = (
            Job.objects.using(using)
            .filter(pk__in=[pk for pk, *_ in rows])
            .update(status=JobStatus.PENDING, dependencies_left=0, **retried(now, run_now=run_now))
        )
        if won:
            announce(
                items=[(pk, _due(at, now, run_now).timestamp(), priority, queue) for pk, priority, queue, at in rows],
                using=using,
            )
    for job_id in batch.exclude(plain).values_list("pk", flat=True):
        try:
            retry(job_id, now=now, using=using, within=jobs, run_now=run_now)
            won += 1
        except (InvalidTransition, Job.DoesNotExist):
            pass  # changed meanwhile, or its rules refuse it: left alone
    return won


def _due(execute_at, now, run_now):
    """Return when a retried job is due, as ``actions.retried`` sets it (a time no one can read: now)."""
    return now if run_now or execute_at is None or not now < execute_at <= LATEST else execute_at
