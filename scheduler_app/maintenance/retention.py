"""Retention: delete finished jobs past ``RETENTION``, rollups past ``ROLLUP_RETENTION`` and audit events past
``AUDIT_RETENTION``, a batch a run."""

import logging

from .. import lifecycle
from ..observability import rollups

logger = logging.getLogger("scheduler_app.maintenance")


class Retention:
    name = "retention"

    def __init__(self, *, interval, using="default"):
        self.interval = interval
        self.using = using

    def run(self, now, epoch):
        deleted = lifecycle.prune(now=now, max_batches=1, using=self.using)
        if deleted:
            logger.info("pruned %d finished jobs past retention", deleted, extra={"action": "prune"})
        rollups.prune(now, using=self.using)
        lifecycle.audit.prune(now=now, using=self.using)
        return epoch + self.interval
