"""The audit trail in the admin: the read-only audit page, each object's history, and the admin's door to it.

``audit()`` records an action taken in the admin (``lifecycle.audit.record``);
``AuditHistoryMixin`` makes an object's "History" page list its audit
events beside Django's own change messages; ``AuditEventAdmin`` is the
audit page: read-only, filterable by user, action, object type and id, and
door (via). It needs ``view_auditevent``.
"""

import json

from django.contrib import admin
from django.contrib.admin.options import ActionLocation
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from ..lifecycle import audit as trail
from ..models import AuditEvent
from .base import ReadOnlyModelAdmin
from .formatting import when_html
from .lookups import unstorable

# The changelist's own parameters: never part of the filter an action records.
_LIST_PARAMS = {"p", "o", "e", "_changelist_filters", "all"}
# The user filter lists the names of this many newest events (no scan of the table).
RECENT_EVENTS = 5000


def audit(request, action, object_type, **fields):
    """Record an action taken in the admin (``lifecycle.audit.record``, which logs it too)."""
    return trail.record(action, via="admin", user=request.user, object_type=object_type, **fields)


def list_filter_of(request, ids=None):
    """Return what an admin action on a change list applied to: the selected ``ids``, or the list's filter."""
    if ids is not None:
        return {"id__in": list(ids)}
    return {
        key: values if len(values) > 1 else values[0] for key, values in request.GET.lists() if key not in _LIST_PARAMS
    }


class UserFilter(admin.SimpleListFilter):
    """Events by who did them (the names of the newest events, and the one chosen)."""

    title = "user"
    parameter_name = "username"

    def lookups(self, request, model_admin):
        names = set(AuditEvent.objects.order_by("-id").values_list("username", flat=True)[:RECENT_EVENTS])
        if self.value():
            names.add(self.value())
        return [(name, name or "(nobody)") for name in sorted(names)]

    def queryset(self, request, queryset):
        return queryset if self.value() is None else queryset.filter(username=self.value())


class ObjectIdFilter(admin.SimpleListFilter):
    """``?object_id=``: one object's events (the links from its History page); no choices of its own."""

    title = "object id"
    parameter_name = "object_id"

    def lookups(self, request, model_admin):
        return [(self.value(), self.value())] if self.value() else []

    def queryset(self, request, queryset):
        return queryset if self.value() is None else queryset.filter(object_id=self.value())


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyModelAdmin):
    list_display = ["at_display", "user_display", "action", "object_type", "target_display", "count", "via"]
    list_display_links = None
    list_filter = [UserFilter, "action", "object_type", ObjectIdFilter, "via"]
    search_fields = ["=object_id", "=username", "=action"]
    search_help_text = "An object id, a user name or an action (exactly)."
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    ordering = ["-at", "-id"]
    readonly_fields = ["at", "username", "action", "object_type", "object_id", "filter", "count", "via", "detail"]
    fields = readonly_fields

    class Media:
        css = {"all": ["scheduler_app/css/admin.css", "scheduler_app/css/audit.css"]}

    def get_actions(self, request, action_location=ActionLocation.CHANGE_LIST):
        return {}

    @admin.display(description="when", ordering="at")
    def at_display(self, obj):
        return when_html(obj.at)

    @admin.display(description="user", ordering="username")
    def user_display(self, obj):
        return obj.username or "–"

    @admin.display(description="on what")
    def target_display(self, obj):
        if obj.object_id is not None:
            url = _object_url(obj.object_type, obj.object_id)
            text = f"{obj.object_type} #{obj.object_id}" if obj.object_type != "queue" else f"queue {obj.object_id}"
            shown = format_html('<a href="{}">{}</a>', url, text) if url else text
            if obj.detail:
                return format_html('{} <span class="sched-audit-detail">{}</span>', shown, _short(obj.detail))
            return shown
        return format_html('<code class="sched-audit-filter">{}</code>', _short(obj.filter))


def _short(value, limit=160):
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _with_text(event):
    event.detail_text = json.dumps(event.detail, sort_keys=True, default=str) if event.detail else ""
    return event


def _object_url(object_type, object_id):
    if object_type == "queue":
        return reverse("admin:scheduler_app_queue_changelist") + "?" + urlencode({"name": object_id})
    return reverse(f"admin:scheduler_app_{object_type}_change", args=[object_id])


class AuditHistoryMixin:
    """An object's History page lists its audit events (newest first) above Django's own change messages."""

    audit_object_type = None  # "job", "workflow", "queue" or "schedule"
    object_history_template = "admin/scheduler_app/object_history.html"
    history_events = 100

    def history_view(self, request, object_id, extra_context=None):
        events = AuditEvent.objects.filter(object_type=self.audit_object_type, object_id=str(object_id))
        if unstorable(str(object_id)):  # an id no row can have (NUL: a DataError on PostgreSQL)
            events = AuditEvent.objects.none()
        extra_context = {
            **(extra_context or {}),
            "audit_events": [_with_text(event) for event in events[: self.history_events]],
            "audit_url": reverse("admin:scheduler_app_auditevent_changelist")
            + "?"
            + urlencode({"object_type": self.audit_object_type, "object_id": object_id}),
            "may_view_audit": request.user.has_perm("scheduler_app.view_auditevent"),
        }
        return super().history_view(request, object_id, extra_context)
