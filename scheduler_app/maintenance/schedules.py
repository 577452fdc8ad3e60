"""Schedules: a safety net that enqueues the runs of due schedules no dispatcher's window held.

Each dispatcher's window materialises the schedules it holds as they come
due; this catches the rest (a window that missed a change).
"""

from .. import schedules


class DueSchedules:
    name = "schedules"

    def __init__(self, *, interval, using="default"):
        self.interval = interval
        self.using = using

    def run(self, now, epoch):
        schedules.materialize_due(now, using=self.using)
        return epoch + self.interval
