"""Expiry: end pending and waiting jobs past their ``expires_at`` cancelled (their dependents settled).

The claims refuse an expired job already; this makes its status say so.
"""

from .. import lifecycle


class Expiry:
    name = "expiry"

    def __init__(self, *, lease, using="default"):
        self.interval = lease / 3
        self.using = using

    def run(self, now, epoch):
        lifecycle.expire_due(now=now, using=self.using)
        return epoch + self.interval
