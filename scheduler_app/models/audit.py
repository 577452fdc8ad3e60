"""The audit trail: who did what to which job, workflow, queue or schedule, when, and through which door."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..vocabulary.bounds import AUDIT_ACTION_MAX, AUDIT_OBJECT_ID_MAX, AUDIT_USERNAME_MAX


class Via(models.TextChoices):
    ADMIN = "admin", "admin"
    API = "api", "API"
    COMMAND = "command", "command"


class ObjectType(models.TextChoices):
    JOB = "job", "job"
    WORKFLOW = "workflow", "workflow"
    QUEUE = "queue", "queue"
    SCHEDULE = "schedule", "schedule"


class AuditEvent(models.Model):
    """One operator action: written by ``lifecycle.audit.record`` only, never changed after.

    ``object_id`` names one object (a queue's name, the others' ids); a bulk
    action has none, and says which objects with ``filter`` (the filter it
    was given, or ``{"id__in": [...]}`` for a selection) and ``count``.
    ``username`` keeps the name when the user is deleted; a command's is
    the operating-system user who ran it.
    """

    at = models.DateTimeField(default=timezone.now)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=AUDIT_USERNAME_MAX, blank=True, default="")
    action = models.CharField(max_length=AUDIT_ACTION_MAX)
    object_type = models.CharField(max_length=16, choices=ObjectType.choices)
    object_id = models.CharField(max_length=AUDIT_OBJECT_ID_MAX, null=True, blank=True)  # noqa: DJ001 - NULL: bulk
    filter = models.JSONField(null=True, blank=True)
    count = models.PositiveIntegerField(default=1)
    via = models.CharField(max_length=8, choices=Via.choices)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["-at", "-id"], name="auditevent_at_idx"),
            models.Index(
                fields=["object_type", "object_id", "-at"],
                condition=Q(object_id__isnull=False),
                name="auditevent_object_idx",
            ),
        ]

    def __str__(self):
        target = f"{self.object_type} {self.object_id}" if self.object_id else f"{self.count} {self.object_type}s"
        return f"{self.username or 'someone'} {self.action} {target} ({self.via}, {self.at:%Y-%m-%d %H:%M:%S})"
