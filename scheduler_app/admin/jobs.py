"""The job admin: list, add (``lifecycle.enqueue``), reschedule and actions.

Entry points only: every change of a job goes through ``lifecycle`` (create
with ``enqueue``, reschedule with ``reschedule``, cancel/retry/run-now with
the ``*_many`` functions).
"""

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from .. import lifecycle, registry
from ..api.filters import search
from ..lifecycle.states import allowed_from, refusal
from ..models import Job, JobStatus
from ..vocabulary.bounds import SEARCH_MAX
from .audit import AuditHistoryMixin, audit, list_filter_of
from .base import SchedulerModelAdmin
from .bulk import BulkActionsMixin, TagFilter
from .changelist import CappedCountPaginator, DateRangeFilter, JobChangeList, QueueFilter, ScheduleFilter, TaskFilter
from .dependencies import WORKFLOW_FIELDS, DependenciesMixin, DependencyFilter
from .forms import JobAddForm, JobRescheduleForm
from .job_fields import JobFields, fields_for
from .job_summary import JobSummary
from .live import EXECUTION_FIELDS, JobLive

# Actions on "all N matching jobs" stop where the list stops counting: past
# it, narrow the filter.
MAX_ACTION_JOBS = CappedCountPaginator.cap
ACTION_CHUNK = 1000
BOTH_LOCATIONS = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]


@admin.register(Job)
class JobAdmin(
    AuditHistoryMixin, BulkActionsMixin, DependenciesMixin, JobSummary, JobLive, JobFields, SchedulerModelAdmin
):
    list_display = [
        "id",
        "task_name",
        "status_badge",
        "priority",
        "queue",
        "execute_at_display",
        "attempts_display",
        "duration_display",
        "worker_short",
    ]
    list_display_links = ["id"]
    list_filter = [
        "status",
        DependencyFilter,
        QueueFilter,
        TaskFilter,
        TagFilter,
        ScheduleFilter,
        ("execute_at", DateRangeFilter),
        ("created_at", DateRangeFilter),
        ("finished_at", DateRangeFilter),
    ]
    search_fields = ["task"]  # shows the box; get_search_results is the API's ?search= (api.filters.search)
    search_help_text = (
        "A job id (42 or #42), or text in the task, unique key, arguments, meta or errors, or a tag (any case)."
    )
    date_hierarchy = "execute_at"
    list_per_page = 50
    list_max_show_all = 500
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    # No column follows a relation (worker is a plain id), so no join and no
    # per-row query; tests pin the query count of a page.
    list_select_related = False
    actions = ["cancel_jobs", "retry_jobs", "retry_jobs_now", "run_jobs_now"]
    change_list_template = "admin/scheduler_app/job/change_list.html"
    audit_object_type = "job"

    add_fieldsets = [
        (None, {"fields": ["task", "args", "kwargs"]}),
        ("When and how", {"fields": ["execute_at", "priority", "queue", "max_attempts", "timeout", "unique_key"]}),
        ("Workflow", {"fields": ["depends_on", "tags"]}),
    ]
    change_fieldsets = [
        (
            None,
            {
                "fields": [
                    "status_badge",
                    "task",
                    "queue",
                    "args_display",
                    "kwargs_display",
                    "unique_key",
                    "all_tags_display",
                    "meta_display",
                    "created_by",
                    "schedule_link",
                    "created_at_display",
                ]
            },
        ),
        (
            "Schedule",
            {
                "fields": [
                    "execute_at",
                    "priority",
                    "due_display",
                    "max_attempts",
                    "timeout",
                    "expires_at_display",
                    "concurrency_key",
                    "concurrency_limit",
                ]
            },
        ),
        ("Execution", {"fields": [*EXECUTION_FIELDS, "cancel_requested_display"]}),
        ("Workflow", {"fields": WORKFLOW_FIELDS}),
        ("Result", {"fields": ["result_display"]}),
        ("Errors", {"fields": ["errors_display"]}),
        ("Logs", {"fields": ["logs_display"], "description": "What the task logged, per attempt, newest first."}),
    ]
    rescheduled_fields = ["execute_at", "priority"]

    class Media:
        css = {"all": ["scheduler_app/css/admin.css"]}
        js = ["scheduler_app/js/job_form.js", "scheduler_app/js/live.js", "scheduler_app/js/job_live.js"]

    # -- list columns and change page fields: JobFields; live updates: JobLive

    def get_changelist(self, request, **kwargs):
        return JobChangeList

    # -- forms: create through lifecycle.enqueue, reschedule through lifecycle.reschedule

    def get_search_results(self, request, queryset, search_term):
        # The API's ?search= rule, the one implementation (api.filters.search).
        if not search_term.strip():
            return queryset, False
        return search(queryset, search_term[:SEARCH_MAX]), False

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return self.add_fieldsets
        # "Cancel requested" only when it was (a running job asked to stop).
        hidden = set() if obj.cancel_requested else {"cancel_requested_display"}
        fieldsets = self.change_fieldsets
        if obj.status not in allowed_from("reschedule"):
            # A job that ran: under the summary, its errors and logs first.
            first = ("Result",) * (obj.status == JobStatus.SUCCEEDED) + ("Errors",) * bool(obj.errors) + ("Logs",)
            fieldsets = [fs for name in first for fs in fieldsets if fs[0] == name] + [
                fs for fs in fieldsets if fs[0] not in first
            ]
        if not (obj.status == JobStatus.PENDING and self.has_change_permission(request, obj)):
            hidden.add("execute_at")  # view only: "when" shows execute_at in the admin's one date format
        # A job that ran: what set it up is one click away (a <details>), so the page stays short.
        folded = {"Schedule", "Workflow"} if obj.status not in allowed_from("reschedule") else set()
        if obj.status == JobStatus.RUNNING:
            # Its attempt, worker, start, progress and last error lead the summary.
            folded |= {"Execution", "Errors"}
            fieldsets = [fs for fs in fieldsets if fs[0] != "Result"]  # none yet
        return [
            (
                name,
                {
                    **opts,
                    "fields": fields_for(request.user, [f for f in opts["fields"] if f not in hidden]),
                    **({"classes": ["collapse"]} if name in folded else {}),
                },
            )
            for name, opts in fieldsets
        ]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        shown = fields_for(request.user, [f for fs in self.change_fieldsets for f in fs[1]["fields"]])
        return [f for f in shown if f not in self.rescheduled_fields]

    def get_form(self, request, obj=None, change=False, **kwargs):
        return JobRescheduleForm if obj is not None else JobAddForm

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        if initial.get("task") and not registry.is_registered(initial["task"]):
            del initial["task"]
        return initial

    def has_change_permission(self, request, obj=None):
        # Only a pending or waiting job can change (execute_at, priority); any other is view-only.
        allowed = super().has_change_permission(request, obj)
        return allowed and (obj is None or obj.status in allowed_from("reschedule"))

    def has_delete_permission(self, request, obj=None):
        # Deleting an active job would pull it from under a dispatcher; finished
        # ones may go (retention prunes them anyway).
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or obj.is_finished)

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        actions = super().get_actions(request, action_location=action_location)
        actions.pop("delete_selected", None)  # would delete running jobs too
        return actions

    def save_model(self, request, obj, form, change):
        if not change:
            options = dict(form.job_options)
            if form.tags:
                options["tags"] = form.tags
            try:
                with transaction.atomic():
                    job, created = lifecycle.enqueue(created_by=request.user, **options)
                    if created:
                        audit(
                            request, "create", "job", object_id=job.pk, detail={"task": job.task, "kwargs": job.kwargs}
                        )
            except ValidationError as exc:  # a dependency deleted since the form was checked
                obj._scheduler_error = "; ".join(exc.messages)
                return
            obj.pk, obj.id = job.pk, job.pk
            obj._scheduler_created = created
            return
        changes = {f: form.cleaned_data[f] for f in form.changed_data if f in self.rescheduled_fields}
        obj._scheduler_error = None
        if changes:
            try:
                with transaction.atomic():
                    lifecycle.reschedule(obj.pk, **changes)
                    audit(request, "reschedule", "job", object_id=obj.pk, detail=changes)
            except lifecycle.InvalidTransition as exc:
                obj._scheduler_error = str(exc)

    def save_related(self, request, form, formsets, change):
        pass  # a job has no related objects the form edits

    def log_addition(self, request, obj, message):
        if getattr(obj, "_scheduler_created", True) and obj.pk is not None:
            return super().log_addition(request, obj, message)
        return None

    def response_add(self, request, obj, post_url_continue=None):
        if getattr(obj, "_scheduler_error", None):
            self.message_user(request, f"No job was created: {obj._scheduler_error}", messages.ERROR)
            return HttpResponseRedirect(request.path)
        if getattr(obj, "_scheduler_created", True):
            return super().response_add(request, obj, post_url_continue)
        existing = Job.objects.get(pk=obj.pk)
        if not self.has_view_or_change_permission(request, existing):
            # Least privilege: who may add jobs but not view them learns the holder's id, nothing of it.
            self.message_user(
                request,
                f"No job was created: job #{existing.pk} already holds unique key “{existing.unique_key}”.",
                messages.WARNING,
            )
            return HttpResponseRedirect(request.path)
        self.message_user(
            request,
            format_html(
                'No job was created: job <a href="{}">#{}</a> ({}) already holds unique key “{}”.',
                reverse("admin:scheduler_app_job_change", args=[existing.pk]),
                existing.pk,
                existing.status,
                existing.unique_key,
            ),
            messages.WARNING,
        )
        return HttpResponseRedirect(reverse("admin:scheduler_app_job_change", args=[existing.pk]))

    def response_change(self, request, obj):
        error = getattr(obj, "_scheduler_error", None)
        if error:
            self.message_user(request, f"Not rescheduled: {error}", messages.ERROR)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "POST" and not any(k.endswith("action") for k in request.POST):
            # A save of a job that left "pending" since the page was loaded
            # (it started, or someone cancelled it): say so instead of a 403.
            obj = self.get_object(request, object_id)
            if (
                obj is not None
                and obj.status not in allowed_from("reschedule")
                and super().has_change_permission(request, obj)
            ):
                self.message_user(
                    request, f"Not rescheduled: {refusal('reschedule', obj.pk, obj.status)}", messages.ERROR
                )
                return HttpResponseRedirect(request.path)
        extra_context = {**(extra_context or {}), "show_save_and_add_another": False}
        if request.method == "GET":
            obj = self.get_object(request, object_id)
            if obj is not None and self.has_view_permission(request, obj):
                extra_context["sched_summary"] = self.summary_html(request, obj)
        return super().change_view(request, object_id, form_url, extra_context)

    # -- actions -------------------------------------------------------------

    def _selected_ids(self, request, queryset):
        ids = list(queryset.order_by().values_list("pk", flat=True)[: MAX_ACTION_JOBS + 1])
        if len(ids) > MAX_ACTION_JOBS:
            self.message_user(
                request,
                f"More than {MAX_ACTION_JOBS:,} jobs are selected; nothing was changed. Narrow the filter and try again.",
                messages.ERROR,
            )
            return None
        return ids

    @staticmethod
    def _chunks(ids):
        for start in range(0, len(ids), ACTION_CHUNK):
            yield ids[start : start + ACTION_CHUNK]

    @staticmethod
    def _audit_bulk(request, action, ids, count, detail=None):
        """Record a bulk action: one job's id when one was selected; else the selection or the filter."""
        if ids is not None and len(ids) == 1:
            audit(request, action.removeprefix("bulk_"), "job", object_id=ids[0], count=count, detail=detail)
        else:
            audit(request, action, "job", filter=list_filter_of(request, ids), count=count, detail=detail)

    def delete_model(self, request, obj):
        with transaction.atomic():
            audit(request, "delete", "job", object_id=obj.pk, detail={"task": obj.task, "status": obj.status})
            super().delete_model(request, obj)

    def _report(self, request, changed_parts, skipped, skipped_reason):
        parts = [p for n, p in changed_parts if n]
        if skipped:
            parts.append(f"skipped {skipped} {plural(skipped)} {skipped_reason}")
        changed = sum(n for n, _ in changed_parts)
        text = "; ".join(parts) + "."
        self.message_user(request, text[0].upper() + text[1:], messages.SUCCESS if changed else messages.WARNING)

    @admin.action(description="Cancel selected jobs", permissions=["change"], location=BOTH_LOCATIONS)
    def cancel_jobs(self, request, queryset):
        across = self.across(request)
        if across is False:
            return self.confirmation(request, queryset, "cancel")  # "all N matching": count them first
        cancelled = requested = skipped = 0
        ids = None
        if across:
            cancelled, requested = lifecycle.cancel_matching(queryset)
        else:
            ids = self._selected_ids(request, queryset)
            if ids is None:
                return
            for chunk in self._chunks(ids):
                c, r, s = lifecycle.cancel_many(chunk)
                cancelled, requested, skipped = cancelled + c, requested + r, skipped + s
        self._audit_bulk(request, "bulk_cancel", ids, cancelled + requested, {"cancel_requested": requested})
        self._report(
            request,
            [
                (cancelled, f"cancelled {cancelled} pending {plural(cancelled)}"),
                (requested, f"asked {requested} running {plural(requested)} to stop (cooperative cancel)"),
            ],
            skipped,
            "that had already finished or were already asked to stop",
        )

    @admin.action(
        description="Retry selected jobs (at their time if still ahead)",
        permissions=["change"],
        location=BOTH_LOCATIONS,
    )
    def retry_jobs(self, request, queryset):
        return self._retry(request, queryset, run_now=False)

    @admin.action(description="Retry selected jobs now", permissions=["change"], location=BOTH_LOCATIONS)
    def retry_jobs_now(self, request, queryset):
        return self._retry(request, queryset, run_now=True)

    def _retry(self, request, queryset, *, run_now):
        across = self.across(request)
        if across is False:
            return self.confirmation(request, queryset, "retry_now" if run_now else "retry")
        retried = skipped = 0
        ids = None
        if across:
            retried = lifecycle.retry_matching(queryset, run_now=run_now)
        else:
            ids = self._selected_ids(request, queryset)
            if ids is None:
                return None
            for chunk in self._chunks(ids):
                r, s = lifecycle.retry_many(chunk, run_now=run_now)
                retried, skipped = retried + r, skipped + s
        self._audit_bulk(request, "bulk_retry", ids, retried)
        when = "to run again now" if run_now else "to run again (at their time if still ahead, else now)"
        self._report(
            request,
            [(retried, f"queued {retried} {plural(retried)} {when}")],
            skipped,
            "that were not failed or cancelled (or whose unique key is taken)",
        )
        return None

    @admin.action(description="Run selected jobs now", permissions=["change"], location=BOTH_LOCATIONS)
    def run_jobs_now(self, request, queryset):
        ids = self._selected_ids(request, queryset)
        if ids is None:
            return
        changed = skipped = 0
        for chunk in self._chunks(ids):
            c, s = lifecycle.run_now_many(chunk)
            changed, skipped = changed + c, skipped + s
        self._audit_bulk(request, "bulk_run_now", ids, changed)
        self._report(
            request, [(changed, f"made {changed} pending {plural(changed)} due now")], skipped, "that were not pending"
        )


def plural(n):
    return "job" if n == 1 else "jobs"
