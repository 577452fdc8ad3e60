"""Workflows: a set of jobs enqueued together (a chain, a group, a chord, or a ``with Workflow(...)`` block).

The jobs point at their workflow (``Job.workflow``). A workflow's status is
derived from its jobs; the row keeps the last derived value and the
callbacks to enqueue when its last job ends. ``callbacks_enqueued_at`` is
the compare-and-set that makes each callback run exactly once: the
transaction that ends the workflow's last job sets it only where it is
still empty. State changes live in ``scheduler_app.lifecycle``.
"""

import sys
from contextvars import ContextVar
from datetime import datetime

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from ..signals import workflow_closed
from ..sql.readable import json_reader
from ..validation.workflows import WORKFLOW_NAME
from ..vocabulary.bounds import WORKFLOW_NAME_MAX


class WorkflowStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# The workflow of the ``with Workflow(...)`` block the code runs in: every
# job built inside it (``lifecycle.building.build_job``, whatever the API)
# belongs to it.
CURRENT = ContextVar("scheduler_app_workflow", default=None)

# The callbacks a workflow takes, in the order they are enqueued.
CALLBACKS = ("on_success", "on_failure", "on_finish")


def current_workflow():
    """Return the workflow of the innermost ``with Workflow(...)`` block, or None."""
    return CURRENT.get()


class Workflow(models.Model):
    """A set of jobs whose status is derived from theirs, with callbacks run once when the last one ends.

    ``Workflow(name=..., on_success=step, on_failure=step, on_finish=step)``:
    callbacks are ``scheduler_app.workflows.step`` objects (anything with a
    ``spec()`` method) or job specs (dicts of ``build_job`` arguments).
    As a context manager the workflow is saved on entry and the block is one
    transaction: every job enqueued inside it, by any API, joins the
    workflow, and they all become visible at once when the block ends (an
    exception rolls all of them back). Closing the block sends
    ``signals.workflow_closed`` (``lifecycle.workflows`` settles a workflow
    whose jobs all ended already).
    """

    name = models.CharField(max_length=WORKFLOW_NAME_MAX, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=WorkflowStatus.choices, default=WorkflowStatus.PENDING, db_default=WorkflowStatus.PENDING
    )
    # {"on_success": spec, "on_failure": spec, "on_finish": spec}: job specs
    # enqueued when the workflow's last job ends.
    callbacks = models.JSONField(default=dict, blank=True, db_default={}, decoder=json_reader)
    callbacks_enqueued_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=WorkflowStatus.values), name="workflow_status_valid")
        ]
        indexes = [
            models.Index(fields=["status", "id"], name="workflow_status_id_idx"),
            models.Index(fields=["name", "id"], name="workflow_name_id_idx"),
        ]

    def __init__(self, *args, on_success=None, on_failure=None, on_finish=None, using=None, **kwargs):
        super().__init__(*args, **kwargs)
        given = {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
        for name, callback in given.items():
            if callback is not None:
                spec = callback.spec() if hasattr(callback, "spec") else dict(callback)
                # Stored as JSON: a time as ISO 8601 text (``lifecycle.workflows.callback_spec`` reads it back).
                spec = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in spec.items()}
                self.callbacks = {**self.callbacks, name: spec}
        self._using = using

    def __enter__(self):
        WORKFLOW_NAME.check(self.name)
        self._atomic = transaction.atomic(using=self._using or "default")
        self._atomic.__enter__()
        try:
            self.save(using=self._using or "default")
        except BaseException:
            self._atomic.__exit__(*sys.exc_info())
            raise
        self._token = CURRENT.set(self)
        return self

    def __exit__(self, kind, value, traceback):
        CURRENT.reset(self._token)
        if kind is None:
            try:
                workflow_closed.send(type(self), workflow=self, using=self._state.db)
            except BaseException:
                self._atomic.__exit__(*sys.exc_info())
                raise
        return self._atomic.__exit__(kind, value, traceback)

    def callback_job_ids(self):
        """Return the ids of the jobs enqueued for its callbacks (they belong to it, but its status is not theirs)."""
        entries = self.callbacks.get("enqueued") if isinstance(self.callbacks, dict) else None
        return [e["job"] for e in entries or () if isinstance(e, dict) and isinstance(e.get("job"), int)]

    @property
    def results(self):
        """Return ``{job id: result}`` of its jobs that succeeded (the stored JSON values), in creation order."""
        done = self.jobs.filter(status="succeeded").exclude(pk__in=self.callback_job_ids()).order_by("pk")
        return dict(done.values_list("pk", "result"))

    def __str__(self):
        return f"Workflow #{self.pk} {self.name or ''} ({self.status})".replace("  ", " ")
