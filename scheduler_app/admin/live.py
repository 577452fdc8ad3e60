"""Live updates of the job page and the job list: one JSON request per page per refresh.

``<id>/live/`` returns the job page's changing fields as HTML (rendered by
the same display methods as the page); ``live/?ids=1,2,3`` returns the
changing cells of the list's rows in one query. ``live.js`` asks for them
every few seconds (the reader picks the interval, and can pause).
"""

import copy

from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse, QueryDict
from django.urls import path
from django.utils import timezone

from ..api.filters import MAX_ID
from ..models import Job
from ..observability import lateness
from .job_fields import fields_for, mark_held

# The job page's fields that change while a job runs (read-only boxes only:
# the reschedule inputs of a pending job are never replaced).
# The page's "Execution" section (``jobs.JobAdmin.fieldsets``) is these, and the cancel flag.
EXECUTION_FIELDS = [
    "attempts_display",
    "worker_display",
    "started_at_display",
    "last_attempted_at_display",
    "finished_at_display",
    "duration_display",
    "lease_display",
    "progress_display",
]
PAGE_FIELDS = ["status_badge", *EXECUTION_FIELDS, "result_display", "errors_display", "logs_display", "due_display"]
# The list's cells that change (its other columns are fixed once made).
LIST_FIELDS = ["status_badge", "execute_at_display", "attempts_display", "duration_display", "worker_short"]
LIST_COLUMNS = [
    "id",
    "status",
    "execute_at",
    "attempts",
    "max_attempts",
    "started_at",
    "last_attempted_at",
    "finished_at",
    "progress",
    "cancel_requested",
    "worker",
    "concurrency_key",
    "concurrency_limit",
    "expires_at",
]
MAX_IDS = 500


class JobLive:
    def get_urls(self):
        urls = super().get_urls()
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        return [
            path("live/", wrap(self.list_live_view), name="%s_%s_live" % info),
            path("<path:object_id>/live/", wrap(self.page_live_view), name="%s_%s_page_live" % info),
            *urls,
        ]

    def page_live_view(self, request, object_id):
        """Return the job page's changing fields: ``{"status", "logs_count", "fields": {name: html}}``."""
        if not object_id.isdigit() or int(object_id) > MAX_ID:
            raise Http404("No job has this id.")
        job = Job.objects.filter(pk=int(object_id)).first()
        if job is None:
            raise Http404("No job has this id.")
        if not self.has_view_permission(request, job):
            raise PermissionDenied
        fields = {name: str(getattr(self, name)(job)) for name in fields_for(request.user, PAGE_FIELDS)}
        summary = str(self.summary_html(request, job))
        return JsonResponse(
            {
                "id": job.pk,
                "status": job.status,
                "logs_count": job.logs_count,
                "fields": fields,
                "summary": summary,
                "at": timezone.now().isoformat(),
            }
        )

    def list_live_view(self, request):
        """Return the changing cells of the listed jobs: ``{"rows": {id: {name: html}}, "page": [id, ...]}``.

        ``ids``: the rows the page shows; ``list``: the page's own query
        string. ``page`` is the ids that page would list now, in order (None
        when its query string no longer reads): where they differ from the
        rows shown (a new job, one that left the filter), the page fetches
        its rows again.
        """
        if not self.has_view_permission(request):
            raise PermissionDenied
        raw = request.GET.get("ids", "")
        ids = [int(i) for i in raw.split(",") if i.isdigit() and int(i) <= MAX_ID][:MAX_IDS]
        rows = {}
        jobs = lateness.attach(mark_held(list(Job.objects.filter(pk__in=ids).only(*LIST_COLUMNS, "queue"))))
        for job in jobs:
            rows[job.pk] = {name: str(self._cell(job, name)) for name in LIST_FIELDS}
        page = self._page_ids(request, request.GET.get("list")) if "list" in request.GET else None
        return JsonResponse({"rows": rows, "page": page, "at": timezone.now().isoformat()})

    def _page_ids(self, request, query_string):
        """Return the ids the job list with ``query_string`` shows now, or None when it cannot be listed."""
        listing = copy.copy(request)
        listing.GET = QueryDict(query_string or "")
        listing._messages = _Quiet()  # a filter's complaint was shown with the page already
        try:
            changelist = self.get_changelist_instance(listing)
        except (IncorrectLookupParameters, PermissionDenied, ValueError):
            return None
        return [job.pk for job in changelist.result_list]

    def _cell(self, job, name):
        value = getattr(self, name, None)
        return value(job) if callable(value) else (getattr(job, name) or "–")


class _Quiet:
    """A message store that keeps nothing (``messages.add_message`` on a live request)."""

    def add(self, level, message, extra_tags=""):
        pass
