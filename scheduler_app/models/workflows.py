"""Workflows: a set of jobs enqueued together (a chain, a group, a chord, or a ``with Workflow(...)`` block).

The jobs point at their workflow (``Job.workflow``). A workflow's status is
derived from its jobs; the row keeps the last derived value and the
callbacks to enqueue when its last job ends. ``callbacks_enqueued_at`` is
the compare-and-set that makes each callback run exactly once: the
transaction that ends the workflow's last job sets it only where it is
still empty. State changes live in ``scheduler_app.lifecycle``.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..sql.readable import json_reader as stored_json
from ..vocabulary.bounds import WORKFLOW_NAME_MAX


class WorkflowStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class Workflow(models.Model):
    name = models.CharField(max_length=WORKFLOW_NAME_MAX, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=WorkflowStatus.choices, default=WorkflowStatus.PENDING,
        db_default=WorkflowStatus.PENDING,
    )
    # {"on_success": spec, "on_failure": spec, "on_finish": spec}: job specs
    # enqueued when the workflow's last job ends.
    callbacks = models.JSONField(default=dict, blank=True, db_default={}, decoder=stored_json)
    callbacks_enqueued_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=WorkflowStatus.values), name="workflow_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "id"], name="workflow_status_id_idx"),
            models.Index(fields=["name", "id"], name="workflow_name_id_idx"),
        ]

    def __str__(self):
        return f"Workflow #{self.pk} {self.name or ''} ({self.status})".replace("  ", " ")
