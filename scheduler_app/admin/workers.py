"""The dispatcher processes (``Worker`` rows), read-only."""

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from ..maintenance import leader
from ..models import Worker
from ..sql.readable import worker_queues, worker_slots
from .base import ReadOnlyModelAdmin
from .formatting import humanize_seconds, slots_text, when_html, worker_state


@admin.register(Worker)
class WorkerAdmin(ReadOnlyModelAdmin):
    # Host and pid are part of the id (and on the worker's page): the list fits 800 px.
    list_display = [
        "id",
        "queues_display",
        "slots_display",
        "alive_badge",
        "heartbeat_age",
        "running",
        "processed",
        "failed",
        "started_display",
    ]
    list_filter = ["state", "hostname"]
    search_fields = ["id", "hostname"]
    ordering = ["-last_heartbeat"]
    show_full_result_count = False
    # Times in the admin's one format (formatting.when_html), not Django's.
    readonly_fields = [
        "id",
        "hostname",
        "pid",
        "queues_display",
        "slots_display",
        "alive_badge",
        "state",
        "lease_seconds",
        "started_display",
        "last_heartbeat_display",
        "heartbeat_age",
        "stopped_display",
        "running",
        "processed",
        "failed",
    ]
    fields = readonly_fields

    change_list_template = "admin/scheduler_app/worker/change_list.html"

    class Media:
        css = {"all": ["scheduler_app/css/admin.css"]}
        js = ["scheduler_app/js/live.js"]  # the list is live (data-swap)

    @admin.display(description="queues")
    def queues_display(self, obj):
        return ", ".join(worker_queues(obj.queues)) or "–"

    @admin.display(description="slots")
    def slots_display(self, obj):
        return slots_text(worker_slots(obj.slots), worker_queues(obj.queues))

    def get_queryset(self, request):
        return leader.with_leader(super().get_queryset(request))

    @admin.display(description="status")
    def alive_badge(self, obj):
        state = worker_state(obj)
        badge = format_html('<span class="sched-badge sched-worker-{}">{}</span>', state, state)
        if not leader.leads(obj):
            return badge
        return format_html(
            '{} <span class="sched-badge sched-worker-leader" title="{}">leader</span>',
            badge,
            "Runs the maintenance: rescue of expired leases, expiry, retention.",
        )

    @admin.display(description="started at", ordering="started_at")
    def started_display(self, obj):
        return when_html(obj.started_at)

    @admin.display(description="last heartbeat")
    def last_heartbeat_display(self, obj):
        return when_html(obj.last_heartbeat)

    @admin.display(description="stopped at")
    def stopped_display(self, obj):
        return when_html(obj.stopped_at)

    @admin.display(description="heartbeat", ordering="-last_heartbeat")
    def heartbeat_age(self, obj):
        if obj.last_heartbeat is None:  # SQLite text that is no time (readable.py)
            return "–"
        return f"{humanize_seconds((timezone.now() - obj.last_heartbeat).total_seconds())} ago"
