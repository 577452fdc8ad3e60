"""Retention: delete finished jobs past their age, in batches."""

from django.utils import timezone

from .. import conf
from ..models import FINISHED_STATUSES, Job


def prune(*, now=None, retention=None, batch=None, max_batches=None, statuses=None, using="default"):
    """Delete finished jobs older than their retention, in batches; return the count.

    ``retention`` maps status -> timedelta (default: the RETENTION setting).
    """
    now = now or timezone.now()
    retention = retention or conf.get("RETENTION")
    batch = batch or conf.get("PRUNE_BATCH")
    deleted = 0
    for status, age in retention.items():
        if statuses and status not in statuses:
            continue
        if status not in FINISHED_STATUSES:
            raise ValueError(f"Only finished jobs can be pruned, not {status!r}.")
        cutoff = now - age
        batches = 0
        while max_batches is None or batches < max_batches:
            ids = list(
                Job.objects.using(using)
                .filter(status=status, finished_at__lt=cutoff)
                .order_by("finished_at")
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                break
            count, _ = Job.objects.using(using).filter(pk__in=ids, status=status).delete()
            deleted += count
            batches += 1
    return deleted
