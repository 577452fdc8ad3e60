"""Rescue: take back attempts whose lease expired (their dispatcher died, froze or lost the database).

Runs every third of a lease, and at the moment the earliest running lease
runs out, so a dead dispatcher's jobs run again within the lease plus a
moment, whoever leads.
"""

from django.db.models import Min

from .. import lifecycle
from ..models import Job, JobStatus

# Seconds past the earliest lease's end before the rescue looks (its renewal may be on its way).
SLACK = 0.5


class Rescue:
    name = "rescue"

    def __init__(self, *, lease, policy, using="default"):
        self.interval = lease / 3
        self.policy = policy
        self.using = using

    def run(self, now, epoch):
        """Rescue what expired by ``now``; return when to look next (epoch seconds)."""
        lifecycle.rescue_expired(now=now, retry_at=self.policy.retry_at, using=self.using)
        earliest = (
            Job.objects.using(self.using)
            .filter(status=JobStatus.RUNNING, lease_expires_at__isnull=False)
            .aggregate(at=Min("lease_expires_at"))["at"]
        )
        if earliest is None:
            return epoch + self.interval
        return min(epoch + self.interval, max(earliest.timestamp() + SLACK, epoch + SLACK))
