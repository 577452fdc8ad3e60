"""The queues page: every queue's load, its limits against their use, its own history charts,
pause/resume; and each queue's limits form.

Mounted as the admin of the ``Queue`` model (``/admin/scheduler_app/queue/``);
it shows queues the backend serves and any with a flag or active jobs, not
only rows of the table (rows are made from ``SCHEDULER["QUEUES"]`` the first
time the page is opened, as a dispatcher would). Numbers come from ``stats``
and ``history``; pause and resume post to the dashboard's queue toggle
(through ``lifecycle``). A queue's change form (``change_queue``) edits its
limits; each box hands its text to the limit's rule, so a bad value is an
error on that box, worded as the API words it. Nothing is added or deleted
here: queues come from settings.
"""

import time
from functools import partial

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from .. import conf, lifecycle
from ..lifecycle.queues import LIMIT_FIELDS
from ..models import Queue
from ..observability import history, stats
from ..sql import readable
from ..validation.fields import CONCURRENCY_LIMIT, RATE_LIMIT, RATE_PERIOD
from .audit import AuditHistoryMixin, audit
from .base import SchedulerModelAdmin
from .changelist import site_view
from .dashboard import QUEUE_PERMISSION, RANGES, minutes_of
from .formatting import humanize_seconds
from .forms import RuleFormField

VIEW_PERMISSIONS = ("scheduler_app.view_queue",)
CHANGE_PERMISSION = "scheduler_app.change_queue"


class QueueLimitsForm(forms.ModelForm):
    concurrency_limit = RuleFormField(
        CONCURRENCY_LIMIT,
        help_text="Most jobs of this queue running at once, across every dispatcher. Empty: no limit.",
    )
    rate_limit = RuleFormField(
        RATE_LIMIT,
        help_text="Most jobs of this queue started per rate period, across every dispatcher. Empty: no limit.",
    )
    rate_period = RuleFormField(RATE_PERIOD, required=True, help_text="Seconds of the rate limit's sliding window.")

    class Meta:
        model = Queue
        fields = list(LIMIT_FIELDS)


def use_text(entry):
    """Return a queue's limits against their use: '2 / 5 running; 7 / 100 started per 60 s'.

    ``entry`` has the keys of a ``stats.queues()`` entry (or of ``stats.queue_use``).
    """
    parts = []
    if entry.get("concurrency_limit") is not None:
        parts.append(f"{entry['running']} / {entry['concurrency_limit']} running")
    if entry.get("rate_limit") is not None:
        parts.append(f"{entry['rate_used']} / {entry['rate_limit']} started per {entry['rate_period']:g} s")
    return "; ".join(parts) or "no limit"


def queue_rows(now, minutes):
    rows = stats.queues(now)
    for q in rows:
        q["lag"] = humanize_seconds(q["oldest_due_lag_seconds"]) if q["due"] else "–"
        q["limits"] = use_text(q)
        q["history"] = history.series(minutes, queue=q["name"], now=now)
    return readable.finite(rows)  # NaN and infinities (rows written around the service): no JSON for them


@admin.register(Queue)
class QueueAdmin(AuditHistoryMixin, SchedulerModelAdmin):  # a name with NUL is no queue, not a DataError
    form = QueueLimitsForm
    audit_object_type = "queue"
    fields = ["name", "paused", *LIMIT_FIELDS, "use_display"]
    readonly_fields = ["name", "paused", "use_display"]

    def get_urls(self):
        wrap = partial(site_view, self)

        app, model = self.opts.app_label, self.opts.model_name
        # The page and its data; of the model admin's own views, a queue's change form (its limits).
        own = [
            u
            for u in super().get_urls()
            if getattr(u, "name", None) in (f"{app}_{model}_change", f"{app}_{model}_history")
        ]
        return [
            path("", wrap(self.changelist_view), name=f"{app}_{model}_changelist"),
            path("data/", wrap(self.data_view), name=f"{app}_{model}_data"),
            *own,
        ]

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("scheduler_app.view_queue") or request.user.has_perm(CHANGE_PERMISSION)

    def has_add_permission(self, request):
        return False  # queues come from settings (TASKS[...]["QUEUES"])

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="current use")
    def use_display(self, obj):
        return use_text(stats.queue_use(obj))

    def save_model(self, request, obj, form, change):
        changes = {f: form.cleaned_data[f] for f in form.changed_data if f in LIMIT_FIELDS}
        if changes:
            with transaction.atomic():
                lifecycle.set_limits(obj.name, **changes)
                audit(request, "set_limits", "queue", object_id=obj.name, detail=changes)

    def _context(self, request, minutes):
        now = timezone.now()
        rows = queue_rows(now, minutes)
        context = {
            "queues": rows,
            "can_pause": request.user.has_perm(QUEUE_PERMISSION),
            "can_change": request.user.has_perm(CHANGE_PERMISSION),
            "minutes": minutes,
        }
        return rows, render_to_string("scheduler_app/queues/_table.html", context, request=request)

    def changelist_view(self, request, extra_context=None):
        """Render the queues page."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        lifecycle.ensure_queues(conf.known_queues())
        minutes = minutes_of(request)
        rows, table = self._context(request, minutes)
        context = {
            **self.admin_site.each_context(request),
            "title": "Queues",
            "subtitle": None,
            "opts": self.opts,
            "table": table,
            "queues": rows,
            "ranges": RANGES,
            "minutes": minutes,
            "data_url": reverse("admin:scheduler_app_queue_data", current_app=self.admin_site.name),
            "refresh_ms": 5000,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/scheduler_app/queues.html", context)

    def data_view(self, request):
        """Return the table's HTML and each queue's history as JSON (one request per refresh)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        started = time.monotonic()
        rows, table = self._context(request, minutes_of(request))
        return JsonResponse(
            {
                "html": {"table": table},
                "histories": {q["name"]: q["history"] for q in rows},
                "generated_at": timezone.now().isoformat(),
                "took_ms": round((time.monotonic() - started) * 1000),
            }
        )
