"""Dispatcher processes: one ``Worker`` row each (the model keeps its public name: its admin URL and API use it)."""

from datetime import timedelta

from django.db import models
from django.utils import timezone

from .. import conf
from ..sql.readable import json_reader as stored_json
from ..vocabulary.bounds import HOSTNAME_MAX, ROLE_MAX, WORKER_ID_MAX


class WorkerState(models.TextChoices):
    ALIVE = "alive", "Alive"
    STOPPED = "stopped", "Stopped"
    DEAD = "dead", "Dead"


class WorkerQuerySet(models.QuerySet):
    def alive(self, now=None):
        return self.filter(state=WorkerState.ALIVE, last_heartbeat__gte=stale_before(now))

    def stale(self, now=None):
        return self.filter(state=WorkerState.ALIVE, last_heartbeat__lt=stale_before(now))


def stale_before(now=None):
    """Return the heartbeat time before which a dispatcher's Worker row counts as dead."""
    lease = conf.get("LEASE")
    return (now or timezone.now()) - timedelta(seconds=lease * conf.get("DEAD_AFTER_LEASES"))


class Worker(models.Model):
    """One dispatcher process (`manage.py rundispatcher`), not one of its threads.

    The name is public (admin, API, ``Job.worker``); inside the dispatcher,
    a process is "the dispatcher", a unit of concurrency a "slot", and the
    thread running an attempt a "worker thread".
    """

    id = models.CharField(max_length=WORKER_ID_MAX, primary_key=True)
    hostname = models.CharField(max_length=HOSTNAME_MAX)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list, help_text="Queues served.", decoder=stored_json)
    slots = models.JSONField(default=dict, help_text="Worker slots per queue group.", decoder=stored_json)
    state = models.CharField(max_length=16, choices=WorkerState.choices, default=WorkerState.ALIVE)
    lease_seconds = models.FloatField(default=30.0)
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(default=timezone.now)
    stopped_at = models.DateTimeField(null=True, blank=True)
    running = models.PositiveIntegerField(default=0)
    processed = models.PositiveBigIntegerField(default=0)
    failed = models.PositiveBigIntegerField(default=0)

    objects = WorkerQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return self.id

    @property
    def alive(self):
        return (
            self.state == WorkerState.ALIVE
            and self.last_heartbeat is not None
            and self.last_heartbeat >= stale_before()
        )


class Leadership(models.Model):
    """Which dispatcher leads a role until when (``maintenance``: the one that runs the maintenance services).

    One row per role, taken and kept by compare-and-set (``maintenance.leader``):
    the leader renews ``until`` every run; another dispatcher takes the row
    once ``until`` passed or the leader is gone (its liveness lock let go).
    """

    role = models.CharField(max_length=ROLE_MAX, primary_key=True)
    worker = models.CharField(max_length=WORKER_ID_MAX, blank=True, default="")
    since = models.DateTimeField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.role}: {self.worker or 'nobody'}"
