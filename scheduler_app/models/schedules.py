"""Schedules: a job to make at cron or interval times."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..sql.readable import json_reader
from ..validation.schedules import MISFIRE_POLICIES
from ..vocabulary.bounds import (
    CRON_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    QUEUE_NAME_MAX,
    SCHEDULE_NAME_MAX,
    TASK_NAME_MAX,
    ZONE_NAME_MAX,
)

# The Schedule class body has a field called ``timezone``.
_now = timezone.now


MisfirePolicy = models.TextChoices(
    "MisfirePolicy", [(value.upper(), (value, label)) for value, label in MISFIRE_POLICIES.items()]
)


class Schedule(models.Model):
    """A recurring job: a cron expression or an interval, materialised into Jobs.

    State changes live in ``scheduler_app.schedules``; the dispatcher moves
    ``next_run_at`` forward with one compare-and-set UPDATE per run.
    """

    name = models.CharField(max_length=SCHEDULE_NAME_MAX, unique=True)
    task = models.CharField(max_length=TASK_NAME_MAX, help_text="Registered task path.")
    args = models.JSONField(default=list, blank=True, decoder=json_reader)
    kwargs = models.JSONField(default=dict, blank=True, decoder=json_reader)
    queue = models.CharField(max_length=QUEUE_NAME_MAX, default="default")
    priority = models.SmallIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    timeout = models.FloatField(null=True, blank=True)
    cron = models.CharField(max_length=CRON_MAX, blank=True, default="", help_text="Five-field cron expression.")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=ZONE_NAME_MAX, default="UTC", help_text="IANA time zone name.")
    enabled = models.BooleanField(default=True)
    misfire_policy = models.CharField(max_length=16, choices=MisfirePolicy.choices, default=MisfirePolicy.RUN_ONCE)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    # None while disabled or after end_at: nothing to run.
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=_now)
    # Written by every change, the dispatcher's compare-and-set included;
    # the dispatcher's change poll reads it.
    updated_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(cron="") & Q(interval_seconds__gte=1)) | (~Q(cron="") & Q(interval_seconds__isnull=True)),
                name="schedule_cron_xor_interval",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=PRIORITY_MIN, priority__lte=PRIORITY_MAX), name="schedule_priority_range"
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_run_at"], condition=Q(enabled=True, next_run_at__isnull=False), name="schedule_due_idx"
            ),
            models.Index(fields=["updated_at"], name="schedule_updated_idx"),
        ]

    def __str__(self):
        return self.name


# Models in modules of their own, imported here to register them with the
# app: what is recorded about runs (job logs, rollups, counters), and flow
# control (dependencies, unique windows, rate windows).
