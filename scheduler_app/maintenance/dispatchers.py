"""Dispatchers: mark the ``Worker`` rows of dispatchers that stopped sending heartbeats dead."""

import logging

from ..models import Worker, WorkerState

logger = logging.getLogger("scheduler_app.maintenance")


class DeadDispatchers:
    name = "dead_dispatchers"

    def __init__(self, *, interval, using="default"):
        self.interval = interval
        self.using = using

    def run(self, now, epoch):
        dead = Worker.objects.using(self.using).stale(now).update(state=WorkerState.DEAD)
        if dead:
            logger.warning("marked %d dispatchers dead (stale heartbeat)", dead, extra={"action": "dead_dispatchers"})
        return epoch + self.interval
