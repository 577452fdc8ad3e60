"""Statistics: let SQLite's planner have them (``PRAGMA optimize``, bounded); PostgreSQL's autovacuum keeps its own.

A dispatcher that reads a window larger than the statistics say also asks
PostgreSQL for an ``ANALYZE`` itself (``sql.statistics``): its own plans
depend on it at once.
"""

from .. import sql


class Statistics:
    name = "statistics"

    def __init__(self, *, interval, using="default"):
        self.interval = interval
        self.using = using

    def run(self, now, epoch):
        sql.dialect(self.using).optimize(using=self.using)
        return epoch + self.interval
