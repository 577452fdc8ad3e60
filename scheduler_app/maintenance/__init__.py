"""Maintenance: the periodic work of the whole installation, run by one elected dispatcher.

One service per module, each a small class with a ``name`` and
``run(now, epoch)`` that does its work and returns when it wants to run
next (epoch seconds):

============================  ===============================================
``rescue.Rescue``             attempts whose lease expired go back to pending
``expiry.Expiry``             jobs past ``expires_at`` end cancelled
``dispatchers.DeadDispatchers``  silent dispatchers' rows marked dead
``schedules.DueSchedules``    due schedule runs no window held are enqueued
``retention.Retention``       finished jobs and rollups past retention deleted
``statistics.Statistics``     SQLite's planner statistics refreshed
============================  ===============================================

Exactly one live dispatcher leads (``leader.Leader``: a row taken by
compare-and-set, handed on when its holder stops, dies or pauses past its
lease); only the leader runs the services. Every dispatcher's loop calls
``Maintenance.run`` when the moment it returned comes: a follower only
checks whether it should lead now (every ``CHECK`` seconds at most), the
leader renews its row and runs what is due. Services are compare-and-sets
themselves: what they change is safe under any overlap.
"""

import logging
from datetime import UTC, datetime

from .dispatchers import DeadDispatchers
from .expiry import Expiry
from .leader import Leader
from .rescue import Rescue
from .retention import Retention
from .schedules import DueSchedules
from .statistics import Statistics

logger = logging.getLogger("scheduler_app.maintenance")

# Seconds between a follower's looks at who leads (a lease's third, when shorter).
CHECK = 2.0


def services(*, lease, policy, housekeeping_interval, prune=True, using="default"):
    """Return the services a leader runs, in the order it runs them."""
    every = housekeeping_interval
    found = [
        Rescue(lease=lease, policy=policy, using=using),
        Expiry(lease=lease, using=using),
        DeadDispatchers(interval=every, using=using),
        DueSchedules(interval=every, using=using),
        Statistics(interval=every, using=using),
    ]
    if prune:
        found.append(Retention(interval=every, using=using))
    return found


class Maintenance:
    """One dispatcher's part in the maintenance: lead and run the services, or check who leads."""

    def __init__(self, worker_id, *, lease, services, using="default"):
        self.leader = Leader(worker_id, lease=lease, using=using)
        self.services = list(services)
        self.renew_every = lease / 3
        self.check_every = min(lease / 3, CHECK)
        self.due = {}  # service name -> epoch of its next run (the leader's)

    @property
    def leads(self):
        return self.leader.leads

    def run(self, epoch):
        """Lead and run the services that are due, or look whether to lead; return when to run again (epoch)."""
        now = datetime.fromtimestamp(epoch, UTC)
        led = self.leader.leads
        if not self.leader.hold(now):
            if led:
                logger.warning("no longer leads the maintenance", extra={"action": "leader_lost"})
            return epoch + self.check_every
        if not led:
            logger.info("leads the maintenance", extra={"action": "leader"})
            self.due = dict.fromkeys((s.name for s in self.services), epoch)
        for service in self.services:
            if self.due[service.name] <= epoch:
                self.due[service.name] = service.run(now, epoch)
        return min(epoch + self.renew_every, *self.due.values())

    def resign(self, epoch):
        """Give the role up (this dispatcher stops)."""
        self.leader.resign(datetime.fromtimestamp(epoch, UTC))
