"""A job's place in a workflow, on its admin page and in the list's filters.

``DependenciesMixin`` adds to the job admin the fields that show a job's
workflow (a link to its page), its dependencies and dependents (linked, with their status badges, read by
``stats.job_links``), and ``DependencyFilter`` the list filter "waiting on
dependencies" (and the jobs that have dependencies or dependents).
"""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from ..models import JobStatus, Workflow
from ..observability import stats
from ..vocabulary.bounds import DEPENDENTS_SHOWN
from .formatting import status_badge

# The job page's "Workflow" fieldset.
WORKFLOW_FIELDS = [
    "workflow_display",
    "depends_on_display",
    "dependents_display",
    "dependencies_left",
    "on_dependency_failure",
    "snoozes",
]


class DependencyFilter(admin.SimpleListFilter):
    title = "dependencies"
    parameter_name = "dependencies"

    def lookups(self, request, model_admin):
        return [
            ("waiting", "Waiting on dependencies"),
            ("has", "Depends on other jobs"),
            ("awaited", "Other jobs depend on it"),
        ]

    def queryset(self, request, queryset):
        if self.value() == "waiting":
            return queryset.filter(status=JobStatus.WAITING)
        if self.value() == "has":
            return queryset.filter(has_dependencies=True)
        if self.value() == "awaited":
            return queryset.filter(has_dependents=True)
        return queryset


def _linked_jobs(pairs):
    if not pairs:
        return "–"
    return format_html_join(
        " ",
        '<span class="sched-link"><a href="{}">#{}</a> {}</span>',
        (
            (reverse("admin:scheduler_app_job_change", args=[job_id]), job_id, status_badge(status))
            for job_id, status in pairs
        ),
    )


class DependenciesMixin:
    """Mixed into JobAdmin: the workflow fields of the job page, and ``?depends_on=ID`` (a job's dependents)."""

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "depends_on" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="workflow")
    def workflow_display(self, obj):
        if obj.workflow_id is None:
            return "–"
        workflow = Workflow.objects.filter(pk=obj.workflow_id).only("name", "status").first()
        if workflow is None:
            return f"#{obj.workflow_id}"
        url = reverse("admin:scheduler_app_workflow_change", args=[workflow.pk])
        return format_html('<a href="{}">{}</a>', url, workflow.name or f"Workflow #{workflow.pk}")

    @admin.display(description="depends on")
    def depends_on_display(self, obj):
        return _linked_jobs(stats.job_links([obj])[obj.pk]["depends_on"])

    @admin.display(description="dependents")
    def dependents_display(self, obj):
        pairs = stats.job_links([obj])[obj.pk]["dependents"]
        more = ""
        if len(pairs) >= DEPENDENTS_SHOWN:
            url = reverse("admin:scheduler_app_job_changelist")
            more = format_html(' <a href="{}?depends_on={}">all of them</a>', url, obj.pk)
        return format_html("{}{}", _linked_jobs(pairs), more)
