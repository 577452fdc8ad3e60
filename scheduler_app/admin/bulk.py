"""The job list's tools for many jobs: a filter by tag, and cancel or retry of "all N matching this filter".

With Django's "Select all N" (``select_across``), the Cancel and Retry
actions first answer a confirmation page that says how many jobs match;
confirmed, they run ``lifecycle.cancel_matching`` / ``retry_matching`` on
the change list's own queryset (the filters and search of the page), in
bounded batches, each a compare-and-set: a job that changed meanwhile is
left alone. The actions need ``change_job`` (Django checks the action's
``permissions``).
"""

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.template.response import TemplateResponse

from ..models import Job
from ..sql.search import tagged
from ..validation.labels import TAG
from ..vocabulary.bounds import TAGS_MAX

# The tag filter lists the tags of this many newest jobs (no scan of the whole table).
RECENT_JOBS = 5000


class TagFilter(admin.SimpleListFilter):
    """Jobs carrying a tag; the choices are the tags of the newest jobs (and the one chosen)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request, model_admin):
        found = set()
        for tags in Job.objects.order_by("-id").values_list("tags", flat=True)[:RECENT_JOBS]:
            if isinstance(tags, list):
                found.update(t for t in tags if isinstance(t, str) and TAG.well_formed(t))
        if self.value() and TAG.well_formed(self.value()):
            found.add(self.value())
        return [(t, t) for t in sorted(found)[: TAGS_MAX * 5]]

    def queryset(self, request, queryset):
        value = self.value()
        if value and TAG.well_formed(value):
            return queryset.filter(tagged([value], queryset.db))
        if value:
            return queryset.none()  # not a tag: no job carries it
        return queryset


class BulkActionsMixin:
    """Cancel and retry of every job the change list's filter matches, after a page that counts them."""

    bulk_template = "admin/scheduler_app/job/bulk_confirm.html"

    @staticmethod
    def across(request):
        """Return whether the action is on "all N matching" and was confirmed: None (not across), False, True."""
        if request.POST.get("select_across") != "1":
            return None
        return "confirmed" in request.POST

    def confirmation(self, request, queryset, action):
        """Return the page that counts the jobs ``action`` would apply to and asks to go on."""
        count = queryset.count()
        verb = {"cancel": "Cancel", "retry": "Retry", "retry_now": "Retry now"}[action]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"{verb} all {count:,} matching jobs?",
            "question": f"{count:,} jobs match this filter. {verb} all of them?",
            "detail": (
                "Pending and waiting jobs are cancelled at once (with their dependents); running ones are asked to stop."
                if action == "cancel"
                else "Failed and cancelled jobs run again now, whatever their time; the others are left as they are."
                if action == "retry_now"
                else "Failed and cancelled jobs run again: now, or at their own time where it is still ahead "
                "(a job cancelled before its time keeps it); the others are left as they are."
            ),
            "button": "Yes, retry them now" if action == "retry_now" else f"Yes, {verb.lower()} them",
            "action": "retry_jobs_now" if action == "retry_now" else f"{action}_jobs",
            "count": count,
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME)[:1],
            "changelist_url": request.get_full_path(),
        }
        return TemplateResponse(request, self.bulk_template, context)
