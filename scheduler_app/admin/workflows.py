"""The workflow admin: the list (status, progress, counts by status), and a workflow's page with its graph.

A workflow's page is a view of its own (``workflow_view``, at the change
URL): its status and progress derived from its jobs, its callbacks, the
graph as one inline <svg> (``graph.render``), and the retry and cancel
buttons, which POST (with the CSRF token) to ``retry/`` and ``cancel/``;
those need ``change_workflow`` and call ``lifecycle.retry_workflow``, ``cancel_workflow``. Workflows
are made by code and the API, never added or deleted here.
"""

from functools import partial
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST
from django.views.generic import RedirectView

from .. import lifecycle
from ..lifecycle.states import InvalidTransition
from ..models import ACTIVE_STATUSES, FINISHED_STATUSES, JobStatus, Workflow
from ..observability import workflows as numbers
from . import graph
from .audit import AuditHistoryMixin, audit
from .base import SchedulerModelAdmin
from .changelist import CappedCountPaginator, site_view
from .formatting import status_badge, status_label, when_html

RETRYABLE = (JobStatus.FAILED, JobStatus.CANCELLED)
# The list's actions work workflow by workflow (each in its own transaction); past this many, narrow the filter.
MAX_ACTION_WORKFLOWS = 100


def counts_html(counts):
    """Return the non-zero job counts as badges: '3 Succeeded 1 Failed'."""
    shown = [(s, n) for s, n in counts.items() if n]
    if not shown:
        return "no jobs"
    return format_html_join(" ", "{}", ((status_badge(s, extra=f" {n}"),) for s, n in shown))


def progress_html(counts):
    """Return '<progress> 7 / 10 done': ended jobs of all jobs."""
    total = sum(counts.values())
    done = sum(counts.get(s, 0) for s in FINISHED_STATUSES)
    return format_html(
        '<span class="sched-wf-progress"><progress max="{}" value="{}"></progress> {} / {} done</span>',
        total or 1,
        done,
        done,
        total,
    )


def callbacks_html(callbacks, job_url):
    """Return a workflow's callbacks: 'on_success: module.task → job #12' (the job once enqueued)."""
    if not isinstance(callbacks, dict):
        return "–"
    enqueued = {}
    for entry in callbacks.get("enqueued") or ():
        if isinstance(entry, dict) and isinstance(entry.get("callback"), str):
            enqueued[entry["callback"]] = entry
    rows = []
    for name in ("on_success", "on_failure", "on_finish"):
        spec = callbacks.get(name)
        if not spec:
            continue
        task = spec.get("task", "?") if isinstance(spec, dict) else "?"
        entry = enqueued.get(name) or {}
        url = job_url(entry["job"]) if isinstance(entry.get("job"), int) else None
        if url:
            done = format_html(' → <a href="{}">job #{}</a>', url, entry["job"])
        elif isinstance(entry.get("job"), int):
            done = format_html(" → job #{}", entry["job"])
        elif entry:
            done = format_html(" → not enqueued: {}", str(entry.get("error", ""))[:200])
        else:
            done = ""
        rows.append((name, str(task), done))
    return format_html_join(" · ", "{}: <code>{}</code>{}", rows) if rows else "–"


def callback_names(callbacks):
    """Return ``{job id: callback name}`` of a workflow's enqueued callbacks (on_success, on_failure, on_finish)."""
    entries = callbacks.get("enqueued") if isinstance(callbacks, dict) else None
    return {
        e["job"]: e["callback"]
        for e in entries or ()
        if isinstance(e, dict) and isinstance(e.get("job"), int) and isinstance(e.get("callback"), str)
    }


@admin.register(Workflow)
class WorkflowAdmin(AuditHistoryMixin, SchedulerModelAdmin):
    audit_object_type = "workflow"

    list_display = [
        "name_display",
        "status_display",
        "progress_display",
        "counts_display",
        "created_display",
        "finished_display",
    ]
    list_display_links = ["name_display"]
    list_filter = ["status"]
    search_fields = ["name"]  # and a number (or #number): the workflow id
    search_help_text = "A workflow id (e.g. 42 or #42) or part of its name."
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    actions = ["retry_workflows", "cancel_workflows"]

    class Media:
        css = {"all": ["scheduler_app/css/admin.css", "scheduler_app/css/workflows.css"]}

    def get_urls(self):
        wrap = partial(site_view, self)
        app, model = self.opts.app_label, self.opts.model_name
        return [
            path("", wrap(self.changelist_view), name=f"{app}_{model}_changelist"),
            path("<path:object_id>/retry/", wrap(self.retry_view), name=f"{app}_{model}_retry"),
            path("<path:object_id>/cancel/", wrap(self.cancel_view), name=f"{app}_{model}_cancel"),
            path("<path:object_id>/change/", wrap(self.workflow_view), name=f"{app}_{model}_change"),
            path("<path:object_id>/history/", wrap(self.history_view), name=f"{app}_{model}_history"),
            path(
                "<path:object_id>/",
                wrap(RedirectView.as_view(pattern_name=f"admin:{app}_{model}_change", permanent=False)),
            ),
        ]

    def has_add_permission(self, request):
        return False  # made by code (chain, group, chord, a Workflow block) and by POST /api/workflows/

    def has_delete_permission(self, request, obj=None):
        return False

    # -- the list -------------------------------------------------------------

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip().lstrip("#")
        if term.isdigit():
            return queryset.filter(pk=int(term)), False
        return super().get_search_results(request, queryset, search_term)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Workflows", **(extra_context or {})})

    def get_changelist_instance(self, request):
        cl = super().get_changelist_instance(request)
        rows = list(cl.result_list)  # the page's rows (cached), with their jobs' counts: one query per page
        derived = numbers.statuses(rows)
        for obj in rows:
            obj.derived = derived[obj.pk]
        return cl

    def _derived(self, obj):
        if not hasattr(obj, "derived"):
            obj.derived = numbers.statuses([obj])[obj.pk]
        return obj.derived

    @admin.display(description="workflow", ordering="-id")
    def name_display(self, obj):
        return (
            format_html('{} <span class="sched-ago">#{}</span>', obj.name, obj.pk)
            if obj.name
            else f"Workflow #{obj.pk}"
        )

    @admin.display(description="status", ordering="status")
    def status_display(self, obj):
        return status_badge(self._derived(obj)[0])

    @admin.display(description="progress")
    def progress_display(self, obj):
        return progress_html(self._derived(obj)[1])

    @admin.display(description="jobs")
    def counts_display(self, obj):
        return counts_html(self._derived(obj)[1])

    @admin.display(description="created", ordering="created_at")
    def created_display(self, obj):
        return when_html(obj.created_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished_display(self, obj):
        return when_html(obj.finished_at)

    # -- actions: the service, for each selected workflow -------------------------

    def _each(self, request, queryset, act):
        """Call ``act`` on each selected workflow; return how many it changed, or None (too many selected)."""
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[: MAX_ACTION_WORKFLOWS + 1])
        if len(ids) > MAX_ACTION_WORKFLOWS:
            self.message_user(
                request,
                f"More than {MAX_ACTION_WORKFLOWS} workflows are selected; nothing was changed. Narrow the filter.",
                messages.ERROR,
            )
            return None
        refused = []
        for pk in ids:
            try:
                self._audited(request, act, pk)
            except (InvalidTransition, Workflow.DoesNotExist) as exc:
                refused.append(f"workflow {pk}: {exc}")
        if refused:
            self.message_user(request, "Not changed: " + "; ".join(refused), messages.ERROR)
        return len(ids) - len(refused)

    @admin.action(description="Retry selected workflows (their failed and cancelled jobs)", permissions=["change"])
    def retry_workflows(self, request, queryset):
        changed = self._each(request, queryset, lifecycle.retry_workflow)
        if changed:
            self.message_user(
                request, f"Retried the failed and cancelled jobs of {changed} workflow(s).", messages.SUCCESS
            )

    @admin.action(
        description="Cancel selected workflows (their pending, waiting and running jobs)", permissions=["change"]
    )
    def cancel_workflows(self, request, queryset):
        changed = self._each(request, queryset, lifecycle.cancel_workflow)
        if changed:
            self.message_user(request, f"Cancelled the active jobs of {changed} workflow(s).", messages.SUCCESS)

    # -- a workflow's page ---------------------------------------------------------

    def _workflow_or_404(self, request, object_id):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("No workflow has this id.")
        return obj

    def workflow_view(self, request, object_id, form_url="", extra_context=None):
        """Render a workflow's page: details, progress, the graph, retry and cancel."""
        obj = self._workflow_or_404(request, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        jobs, edges, callbacks = numbers.graph(obj)
        counts = dict.fromkeys(JobStatus.values, 0)
        for pk, _, status in jobs:
            if pk not in callbacks:  # the callbacks' jobs are drawn, not counted
                counts[status] = counts.get(status, 0) + 1
        status = lifecycle.derive_status(counts)
        jobs_url = reverse("admin:scheduler_app_job_changelist", current_app=self.admin_site.name)
        sees_jobs = request.user.has_perm("scheduler_app.view_job") or request.user.has_perm("scheduler_app.change_job")
        job_url = partial(self._job_url, current_app=self.admin_site.name) if sees_jobs else lambda pk: None
        svg, grouped = graph.render(
            jobs,
            edges,
            job_url=job_url,
            group_url=lambda task: f"{jobs_url}?{urlencode({'workflow': obj.pk, 'task': task})}" if sees_jobs else None,
            label=f"The jobs of workflow {obj.pk} and their dependencies",
            last={pk: callback_names(obj.callbacks).get(pk, "callback") for pk in callbacks},
        )
        can_change = self.has_change_permission(request, obj)
        context = {
            **self.admin_site.each_context(request),
            "title": str(obj.name or f"Workflow #{obj.pk}"),
            "subtitle": None,
            "opts": self.opts,
            "original": obj,
            "status": status,
            "status_html": status_badge(status),
            "counts_html": counts_html(counts),
            "progress_html": progress_html(counts),
            "callbacks_html": callbacks_html(obj.callbacks, job_url),
            "created_html": when_html(obj.created_at),
            "finished_html": when_html(obj.finished_at),
            "callbacks_at_html": when_html(obj.callbacks_enqueued_at),
            "total": len(jobs),
            "graph": svg,
            "framed": 'class="sched-frame"' in svg,
            "grouped": grouped,
            "nodes_max": graph.NODES_MAX,
            "legend": [(s, status_label(s)) for s in JobStatus.values],
            "jobs_url": f"{jobs_url}?workflow={obj.pk}" if sees_jobs else None,
            "can_retry": can_change and any(counts[s] for s in RETRYABLE),
            "can_cancel": can_change and any(counts[s] for s in ACTIVE_STATUSES),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/scheduler_app/workflow/detail.html", context)

    @staticmethod
    def _audited(request, act, pk):
        """Call ``act`` (the service's retry_workflow or cancel_workflow) and record it, in one transaction."""
        with transaction.atomic():
            workflow = act(pk)
            audit(request, act.__name__.split("_")[0], "workflow", object_id=pk)
        return workflow

    @staticmethod
    def _job_url(pk, current_app):
        return reverse("admin:scheduler_app_job_change", args=[pk], current_app=current_app)

    def _act(self, request, object_id, act, statuses, describe):
        """POST retry/ or cancel/: ``act`` on the workflow (change_workflow), then back to its page with what happened."""
        obj = self._workflow_or_404(request, object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        before = numbers.statuses([obj])[obj.pk][1]
        try:
            workflow = self._audited(request, act, obj.pk)
        except InvalidTransition as exc:
            self.message_user(request, f"Nothing was changed: {exc}", messages.ERROR)
        except Workflow.DoesNotExist:
            raise Http404("No workflow has this id.") from None
        else:
            self.message_user(
                request, describe(sum(before.get(s, 0) for s in statuses), workflow.status), messages.SUCCESS
            )
        return HttpResponseRedirect(
            reverse("admin:scheduler_app_workflow_change", args=[obj.pk], current_app=self.admin_site.name)
        )

    @method_decorator(require_POST)
    def retry_view(self, request, object_id):
        """Retry the workflow's failed and cancelled jobs (their dependents come back waiting)."""
        return self._act(
            request,
            object_id,
            lifecycle.retry_workflow,
            RETRYABLE,
            lambda n, status: f"Retried {n} failed or cancelled job(s); the workflow is {status}.",
        )

    @method_decorator(require_POST)
    def cancel_view(self, request, object_id):
        """Cancel the workflow's pending and waiting jobs, and ask its running ones to stop."""
        return self._act(
            request,
            object_id,
            lifecycle.cancel_workflow,
            ACTIVE_STATUSES,
            lambda n, status: (
                f"Cancelled the workflow's {n} pending, waiting or running job(s) (running ones are asked to stop); it is {status}."
            ),
        )
