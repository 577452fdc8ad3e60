"""The queues page: every queue's load, its own history charts, and pause/resume.

Mounted as the admin of the ``Queue`` model (``/admin/scheduler_app/queue/``);
it shows queues the backend serves and any with a flag or active jobs, not
only rows of the table. Numbers come from ``stats`` and ``history``; pause and
resume post to the dashboard's queue toggle (through ``lifecycle``).
"""

import time
from functools import update_wrapper

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from .. import history, stats
from ..models import Queue
from .dashboard import QUEUE_PERMISSION, RANGES, minutes_of
from .formatting import humanize_seconds

VIEW_PERMISSIONS = ("scheduler_app.view_queue",)


def queue_rows(now, minutes):
    rows = stats.queues(now)
    for q in rows:
        q["lag"] = humanize_seconds(q["oldest_due_lag_seconds"]) if q["due"] else "–"
        q["history"] = history.series(minutes, queue=q["name"], now=now)
    return rows


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    def get_urls(self):
        def wrap(view):
            def wrapper(*args, **kwargs):
                return self.admin_site.admin_view(view)(*args, **kwargs)

            wrapper.model_admin = self
            return update_wrapper(wrapper, view)

        app, model = self.opts.app_label, self.opts.model_name
        return [
            path("", wrap(self.changelist_view), name=f"{app}_{model}_changelist"),
            path("data/", wrap(self.data_view), name=f"{app}_{model}_data"),
        ]

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("scheduler_app.view_queue")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def _context(self, request, minutes):
        now = timezone.now()
        rows = queue_rows(now, minutes)
        context = {"queues": rows, "can_pause": request.user.has_perm(QUEUE_PERMISSION), "minutes": minutes}
        return rows, render_to_string("scheduler_app/queues/_table.html", context, request=request)

    def changelist_view(self, request, extra_context=None):
        """Render the queues page."""
        if not self.has_view_permission(request):
            raise PermissionDenied
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
        return JsonResponse({
            "html": {"table": table},
            "histories": {q["name"]: q["history"] for q in rows},
            "generated_at": timezone.now().isoformat(),
            "took_ms": round((time.monotonic() - started) * 1000),
        })
