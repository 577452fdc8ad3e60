"""Expiry: a job not started by its ``expires_at`` never starts, and the sweep ends it cancelled.

The claims refuse an expired job themselves (``sql.base.unexpired``), so a
job never starts late whatever the sweep's pace; :func:`expire_due`, run by
every dispatcher's maintenance (with the rescue of expired leases), makes
the status say so: ``cancelled`` with the error ``Expired: not started by
<time>`` (ISO 8601, UTC), and its dependents settled as any cancel settles
them (cancelled too, unless made to run anyway).
"""

import logging

from django.db import transaction
from django.utils import timezone

from .. import sql
from ..models import JobStatus
from .announce import announce
from .dependencies import settle

logger = logging.getLogger(__name__)


def expire_due(*, now=None, limit=500, using="default"):
    """End up to ``limit`` pending or waiting jobs past their ``expires_at`` cancelled; return how many."""
    now = now or timezone.now()
    with transaction.atomic(using=using):
        rows = sql.expire(now=now, limit=limit, using=using)
        if rows:
            announce(removed=[job_id for job_id, _, _ in rows], queues={q for _, q, _ in rows}, using=using)
            settle({job_id: JobStatus.CANCELLED for job_id, _, has in rows if has}, now=now, using=using)
    if rows:
        logger.info("cancelled %d expired jobs", len(rows), extra={"action": "expire"})
    return len(rows)
