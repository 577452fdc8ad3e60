"""The head of a job's page: its status, last error, attempts, and Retry / Cancel buttons.

``JobSummary`` is mixed into ``JobAdmin``: it renders the summary (the page
and its live JSON use the same template) and adds the buttons' POST views
(``<id>/retry/``, ``<id>/cancel/``), which check ``change_job`` and go
through ``lifecycle.retry`` / ``lifecycle.cancel`` (compare-and-set; a
refusal is shown as the lifecycle words it).
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from .. import lifecycle
from ..api.filters import MAX_ID
from ..lifecycle.states import allowed_from, refusal
from ..models import Job, JobStatus
from ..sql.readable import error_entries
from ..validation.fields import PROGRESS
from .audit import audit
from .formatting import exact_time, status_badge, when_html, worker_short_html

CHANGE_PERMISSION = "scheduler_app.change_job"
ACTIONS = {"retry": "Retry", "cancel": "Cancel"}


def summary_context(job, user, now=None):
    """Return what the summary shows of ``job`` (template values)."""
    now = now or timezone.now()
    entries = error_entries(job.errors)
    last = entries[-1] if entries else None
    progress = PROGRESS.shown(job.progress) if job.status == JobStatus.RUNNING else None
    buttons = []
    if user.has_perm(CHANGE_PERMISSION):  # without it, no buttons (the POSTs refuse anyway)
        for action, label in ACTIONS.items():
            asked = action == "cancel" and job.cancel_requested
            allowed = job.status in allowed_from(action) and not asked
            reason = "" if allowed else ("Already asked to stop." if asked else refusal(action, job.pk, job.status))
            buttons.append({"action": action, "label": label, "allowed": allowed, "reason": reason})
        if job.status in allowed_from("retry") and job.execute_at is not None and job.execute_at > now:
            # Its time is still ahead (cancelled before it): Retry keeps it; this one runs it now.
            buttons.insert(1, {"action": "retry", "label": "Retry now", "allowed": True, "reason": "", "now": True})
            buttons[0]["label"] = "Retry at its time"
    if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
        when_label, when = "finished", job.finished_at
    elif job.status == JobStatus.RUNNING:
        when_label, when = "started", job.attempt_started_at
    else:
        when_label, when = "due", job.execute_at
    return {
        "job": job,
        "badge": status_badge(job.status),
        "exception_class": (last["exception_class"] or "").rpartition(".")[2] if last else "",
        "exception_path": last["exception_class"] if last else "",
        "message": last["message"] if last else "",
        "error_attempt": last["attempt"] if last else None,
        "attempts": f"{job.attempts}/{job.max_attempts}",
        "task_name": job.task.rpartition(".")[2],
        "when_label": when_label,
        "when_html": when_html(when, now, late=job.status == JobStatus.PENDING),
        "worker_html": worker_short_html(job.worker),
        "progress": progress,
        "cancel_requested": job.cancel_requested and job.status == JobStatus.RUNNING,
        "buttons": buttons,
    }


class JobSummary:
    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/retry/", wrap(require_POST(self.retry_view)), name="%s_%s_retry" % info),
            path("<path:object_id>/cancel/", wrap(require_POST(self.cancel_view)), name="%s_%s_cancel" % info),
            *super().get_urls(),
        ]

    def summary_html(self, request, job):
        """Return the summary of ``job``'s page (also sent by the live JSON)."""
        return render_to_string(
            "admin/scheduler_app/job/_summary.html", summary_context(job, request.user), request=request
        )

    def retry_view(self, request, object_id):
        return self._act(request, object_id, "retry")

    def cancel_view(self, request, object_id):
        return self._act(request, object_id, "cancel")

    def _act(self, request, object_id, action):
        if not object_id.isdigit() or int(object_id) > MAX_ID:
            raise Http404("No job has this id.")
        job_id = int(object_id)
        if not request.user.has_perm(CHANGE_PERMISSION):
            raise PermissionDenied
        page = reverse("admin:scheduler_app_job_change", args=[job_id], current_app=self.admin_site.name)
        run_now = request.POST.get("now") == "1"
        try:
            with transaction.atomic():
                done = lifecycle.retry(job_id, run_now=run_now) if action == "retry" else lifecycle.cancel(job_id)
                audit(request, action, "job", object_id=job_id, detail={} if action == "retry" else {"outcome": done})
        except Job.DoesNotExist:
            raise Http404("No job has this id.") from None
        except lifecycle.InvalidTransition as exc:
            self.message_user(request, f"Not done: {exc}", messages.ERROR)
            return HttpResponseRedirect(page)
        if action == "retry" and done.status == JobStatus.PENDING and done.execute_at > timezone.now():
            text = f"Job {job_id} is pending again: it runs at its time, {exact_time(done.execute_at)}."
        elif action == "retry":
            text = f"Job {job_id} is {done.status} again" + (
                ": it runs now." if done.status == JobStatus.PENDING else ", for its dependencies."
            )
        elif done == "cancelled":
            text = f"Job {job_id} is cancelled."
        else:
            text = f"Job {job_id} was asked to stop (cooperative cancel): its task stops at its next check."
        self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(page)
