"""Workflows: their status, their callbacks (each enqueued once), creating one.

A workflow's jobs have ``has_dependents`` set, so every path that ends one
(the dispatcher's finish, a cancel, a rescue, a release, a dependency's
failure) runs ``dependencies.settle`` in its transaction, which calls
:func:`progress`: the workflow's row is locked, its jobs are counted by a
statement that runs after the lock was granted (so it sees every ending
committed before, PostgreSQL's read committed), its status is stored, and
the transaction that finds every job ended sets ``callbacks_enqueued_at``
by compare-and-set and enqueues the callbacks. Two dispatchers ending the
last two jobs at once take the lock in turn: the second sees both endings.

The callbacks' own jobs belong to the workflow (a task sees
``context.workflow_id``) but are not among the jobs its status is derived
from: their ids are recorded in ``callbacks["enqueued"]``. Retrying and
cancelling a workflow as a whole are operator actions (``actions``).
"""

import logging

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from ..models import Job, JobStatus, Workflow, WorkflowStatus
from ..models.workflows import CALLBACKS
from ..validation.admission import EXPIRES_AT
from ..validation.fields import EXECUTE_AT
from ..vocabulary.bounds import TASK_NAME_MAX
from .building import build_job
from .creation import enqueue_many, enqueue_many_created
from .depends_on import unknown
from .states import BulkValidationError

logger = logging.getLogger(__name__)

ACTIVE = (JobStatus.PENDING, JobStatus.WAITING, JobStatus.RUNNING)
ENDED = (WorkflowStatus.SUCCEEDED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)
# The error of a callback's job that could not be made when its workflow ended.
CALLBACK_REFUSED_CLASS = "scheduler_app.lifecycle.CallbackRefused"


def derive_status(counts):
    """Return a workflow's status from ``{job status: how many of its jobs}``: the one rule.

    ``pending`` until one of its jobs runs or ends; ``running`` while any is
    pending, waiting or running; then ``failed`` if any failed, else
    ``cancelled`` if any was cancelled, else ``succeeded`` (a workflow
    without jobs too).
    """
    active = sum(counts.get(s, 0) for s in ACTIVE)
    ended = sum(n for s, n in counts.items() if s not in ACTIVE)
    if active:
        return WorkflowStatus.RUNNING if counts.get(JobStatus.RUNNING) or ended else WorkflowStatus.PENDING
    if counts.get(JobStatus.FAILED):
        return WorkflowStatus.FAILED
    if counts.get(JobStatus.CANCELLED):
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.SUCCEEDED


def callback_ids(workflow):
    """Return the ids of the jobs enqueued as ``workflow``'s callbacks."""
    return workflow.callback_job_ids()


def members(workflow, *, using="default"):
    """Return the QuerySet of ``workflow``'s jobs, its callbacks' jobs left out."""
    return Job.objects.using(using).filter(workflow_id=workflow.pk).exclude(pk__in=callback_ids(workflow))


def counts(workflows, *, using="default"):
    """Return ``{workflow id: {job status: count}}`` of ``workflows``' jobs (callbacks left out), one query."""
    workflows = list(workflows)
    if not workflows:
        return {}
    left_out = [pk for w in workflows for pk in callback_ids(w)]
    rows = (
        Job.objects.using(using)
        .filter(workflow_id__in=[w.pk for w in workflows])
        .exclude(pk__in=left_out)
        .order_by()
        .values_list("workflow_id", "status")
        .annotate(n=Count("pk"))
    )
    found = {w.pk: {} for w in workflows}
    for workflow_id, status, n in rows:
        found[workflow_id][status] = n
    return found


def statuses(workflows, *, using="default"):
    """Return ``{workflow id: status}`` derived now from the jobs (one query)."""
    return {pk: derive_status(c) for pk, c in counts(workflows, using=using).items()}


def with_status(workflows, status):
    """Filter a Workflow QuerySet to those whose status (as ``derive_status`` gives it now) is ``status``.

    The stored status is kept by the transactions that end jobs; the one
    change no ending makes, a first job starting, is read from the jobs: a
    stored ``pending`` workflow with a running job is ``running``. Served by
    ``job_workflow_active_idx``.
    """
    started = Exists(Job.objects.filter(workflow_id=OuterRef("pk"), status=JobStatus.RUNNING))
    if status == WorkflowStatus.RUNNING:
        return workflows.filter(Q(status=WorkflowStatus.RUNNING) | Q(started, status=WorkflowStatus.PENDING))
    if status == WorkflowStatus.PENDING:
        return workflows.filter(~started, status=WorkflowStatus.PENDING)
    return workflows.filter(status=status)


def progress(ended, *, now=None, using="default"):
    """Bring the workflows of the jobs that just ended (``ended``: their ids) up to date, in the caller's transaction."""
    ids = list(ended)
    if not ids:
        return
    found = (
        Job.objects.using(using)
        .filter(pk__in=ids, workflow__isnull=False)
        .order_by()
        .values_list("workflow_id", flat=True)
    )
    for workflow_id in sorted(set(found)):
        refresh(workflow_id, now=now, using=using)


def refresh(workflow_id, *, now=None, using="default"):
    """Store a workflow's status; enqueue its callbacks if its last job ended and nobody did yet. Return the workflow.

    Runs in the transaction that changed its jobs (after their rows were
    written: jobs first, then the workflow, in every path). A running
    workflow with a job still active is left as it is after one indexed
    lookup (``job_workflow_active_idx``), so a finish costs the same in a
    workflow of ten jobs or of ten thousand; its jobs are counted when it
    starts and when it ends.
    """
    now = now or timezone.now()
    with transaction.atomic(using=using):
        workflow = Workflow.objects.using(using).select_for_update().filter(pk=workflow_id).first()
        if workflow is None:
            return None
        # Statements of their own, after the lock: they see every ending committed before.
        if workflow.status == WorkflowStatus.RUNNING and _any_active(workflow, using):
            return workflow
        status = statuses([workflow], using=using)[workflow.pk]
        ended = status in ENDED
        changes = {"status": status, "updated_at": now, "finished_at": now if ended else None}
        Workflow.objects.using(using).filter(pk=workflow.pk).update(**changes)
        for field, value in changes.items():
            setattr(workflow, field, value)
        if ended and workflow.callbacks_enqueued_at is None:
            won = (
                Workflow.objects.using(using)
                .filter(pk=workflow.pk, callbacks_enqueued_at__isnull=True)
                .update(callbacks_enqueued_at=now)
            )
            if won:
                workflow.callbacks_enqueued_at = now
                _enqueue_callbacks(workflow, status, using)
    return workflow


def _any_active(workflow, using):
    return members(workflow, using=using).filter(status__in=ACTIVE).exists()


def due_callbacks(status):
    """Return the callbacks a workflow that ended in ``status`` runs, in order."""
    failed = status in (WorkflowStatus.FAILED, WorkflowStatus.CANCELLED)
    return [name for name in CALLBACKS if name == "on_finish" or (name == "on_failure") == failed]


def _enqueue_callbacks(workflow, status, using):
    """Enqueue the workflow's callbacks for ``status`` as jobs of the workflow; record their ids.

    A callback that can no longer be made (its task is gone, a job it
    depends on was pruned) becomes a failed job of the workflow whose error
    says why (:func:`_refused`); it never holds up the finish that ended the
    workflow.
    """
    callbacks = dict(workflow.callbacks) if isinstance(workflow.callbacks, dict) else {}
    enqueued = list(callbacks.get("enqueued") or [])
    for name in due_callbacks(status):
        spec = callbacks.get(name)
        if not isinstance(spec, dict):
            continue
        try:
            with transaction.atomic(using=using):
                made = {**callback_spec(spec), "workflow": workflow.pk}
                [job] = enqueue_many([made], created_by=workflow.created_by_id, using=using)
            enqueued.append({"callback": name, "job": job.pk})
        except Exception as exc:  # noqa: BLE001 - whatever it was, the workflow's ending stands: the reason is kept on a job
            reason = "; ".join(spec_errors(exc))
            logger.error(
                "workflow %s: its %s callback could not be enqueued: %s",
                workflow.pk,
                name,
                reason,
                extra={"action": "workflow_callback_refused"},
            )
            job = _refused(workflow, name, spec, reason, using)
            enqueued.append({"callback": name, "job": job.pk, "error": reason[:1000]})
    callbacks["enqueued"] = enqueued
    workflow.callbacks = callbacks
    Workflow.objects.using(using).filter(pk=workflow.pk).update(callbacks=callbacks)


def _refused(workflow, name, spec, reason, using):
    """Save a failed job of the workflow for callback ``name`` that could not be enqueued; its error says why."""
    now = timezone.now()
    task, args, kwargs = spec.get("task"), spec.get("args"), spec.get("kwargs")
    error = {
        "attempt": 0,
        "time": now.isoformat(),
        "worker": "",
        "exception_class": CALLBACK_REFUSED_CLASS,
        "message": f"The workflow's {name} callback could not be enqueued: {reason}",
        "traceback": "",
    }
    return Job.objects.using(using).create(
        task=str(task or "")[:TASK_NAME_MAX],
        args=args if isinstance(args, list) else [],
        kwargs=kwargs if isinstance(kwargs, dict) else {},
        status=JobStatus.FAILED,
        max_attempts=1,
        workflow_id=workflow.pk,
        created_by_id=workflow.created_by_id,
        execute_at=now,
        created_at=now,
        updated_at=now,
        finished_at=now,
        errors=[error],
    )


def spec_errors(exc):
    """Return why a callback spec was refused, as ``["field: message", ...]``."""
    if isinstance(exc, BulkValidationError):
        fields = next(iter(exc.by_index.values()), {})
    elif isinstance(exc, ValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
    elif isinstance(exc, KeyError):
        fields = {"task": ["This field is required."]}
    elif isinstance(exc, TypeError):
        fields = {"non_field_errors": [str(exc)]}
    else:
        fields = {"non_field_errors": [f"{type(exc).__name__}: {exc}"]}
    return [f"{field}: {m}" for field, messages in fields.items() for m in messages]


# The times a callback spec may hold, each with its rule: stored as ISO 8601 text (``Workflow``), parsed back here.
_SPEC_TIMES = {"execute_at": EXECUTE_AT, "expires_at": EXPIRES_AT}


def callback_spec(spec):
    """Return a stored callback spec as ``build_job`` arguments (its times, stored as text, parsed)."""
    spec = dict(spec)
    for field, rule in _SPEC_TIMES.items():
        if isinstance(spec.get(field), str):
            spec[field] = rule.parse(spec[field])
    return spec


def check_callbacks(callbacks, *, using="default"):
    """Raise ValidationError ``{callback: ["field: error", ...]}`` for callbacks that could not be enqueued.

    The rules of ``enqueue_many``'s jobs: every field's, and that each job a
    callback depends on exists (the workflow's own jobs, made in this
    transaction, do).
    """
    errors = {}
    for name in CALLBACKS:
        spec = callbacks.get(name)
        if spec is None:
            continue
        try:
            spec = callback_spec(spec)
            job = build_job(spec.pop("task"), **spec)
        except (KeyError, TypeError, ValidationError) as exc:
            errors[name] = spec_errors(exc)
            continue
        missing = unknown(job._depends_on, using=using)
        if missing:
            errors[name] = [f"depends_on: {m}" for m in missing]
    if errors:
        raise ValidationError(errors)


def closed(sender, workflow, using, **kwargs):
    """A ``with Workflow(...)`` block ended: check its callbacks; settle it now if its jobs all ended (or it has none).

    The receiver of ``signals.workflow_closed``, connected in ``apps.py``.
    """
    check_callbacks(workflow.callbacks or {}, using=using)
    refresh(workflow.pk, using=using)


def create_workflow(specs, *, name="", callbacks=None, created_by=None, max_size=None, using="default"):
    """Create a workflow of the jobs ``specs`` (``enqueue_many``'s) in one transaction; return ``(workflow, jobs)``.

    ``callbacks`` maps ``on_success``, ``on_failure``, ``on_finish`` to job
    specs (or steps). Raise ValidationError: ``{"name": ...}``, ``{callback: [...]}``;
    BulkValidationError for the jobs.
    """
    callbacks = {k: v for k, v in (callbacks or {}).items() if v is not None}
    workflow = Workflow(name=name, created_by_id=getattr(created_by, "pk", created_by), using=using, **callbacks)
    with workflow:
        jobs = [job for job, _ in enqueue_many_created(specs, created_by=created_by, max_size=max_size, using=using)]
    return workflow, jobs


def workflow_of(job_id, *, using="default"):
    """Return the id of the workflow job ``job_id`` belongs to, or None."""
    return Job.objects.using(using).filter(pk=job_id).values_list("workflow_id", flat=True).first()
