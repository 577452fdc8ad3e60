"""The admin of recurring schedules.

Entry points only: the form parses what a person typed and asks
``schedules.clean`` (the one authority on a valid schedule) for errors,
shown inline on their fields; saving, enabling, disabling and "run now"
call the ``schedules`` service.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from .. import conf, registry, schedules
from ..lifecycle.building import QUEUE, TASK
from ..models import Schedule
from ..validation.fields import ARGS, KWARGS, MAX_ATTEMPTS, PRIORITY, TIMEOUT
from ..validation.schedules import EDITABLE, INTERVAL
from ..vocabulary.bounds import PRIORITY_MAX, PRIORITY_MIN
from .audit import AuditHistoryMixin, audit, list_filter_of
from .base import SchedulerModelAdmin
from .formatting import status_badge, when_html
from .forms import EncodableDataMixin, JSONTextField, RuleChoiceField, RuleFormField, SplitDateTime
from .schedule_runs import ComingRunsMixin


class ScheduleForm(EncodableDataMixin, forms.ModelForm):
    """Create or change a schedule; errors from ``schedules.clean`` land on their fields."""

    task = RuleChoiceField(TASK, required=True)
    queue = RuleChoiceField(QUEUE, help_text="Empty: the task's queue.")
    priority = RuleFormField(
        PRIORITY, help_text=f"{PRIORITY_MIN}..{PRIORITY_MAX}, higher runs first. Empty: the task's."
    )
    max_attempts = RuleFormField(MAX_ATTEMPTS, help_text="Empty: the default.")
    timeout = RuleFormField(
        TIMEOUT, help_text="Seconds an attempt may run, or a duration (90s, 30m, 1h30m). Empty: no limit."
    )
    args = JSONTextField(ARGS, initial="[]", help_text='A JSON list, e.g. [1, "a"].')
    kwargs = JSONTextField(KWARGS, initial="{}", help_text='A JSON object, e.g. {"x": 1}.')
    interval_seconds = RuleFormField(
        INTERVAL, help_text="Run every this many seconds. Leave empty for a cron expression."
    )
    cron = forms.CharField(
        required=False,
        help_text=schedules.CRON_HELP + " Leave empty for an interval.",
        widget=forms.TextInput(attrs={"class": "vTextField", "spellcheck": "false"}),
    )
    timezone = forms.CharField(initial="UTC", help_text="IANA time zone of the cron expression, e.g. Europe/Berlin.")

    class Meta:
        model = Schedule
        fields = list(EDITABLE)
        widgets = {"start_at": SplitDateTime, "end_at": SplitDateTime}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "---------")] + [(n, n) for n in registry.names()]
        self.fields["queue"].choices = [("", "(the task's queue)")] + [(q, q) for q in sorted(conf.known_queues())]
        self.schedule_data = None
        if self.instance.pk:  # shown with its secrets as [FILTERED]; clean() puts them back
            for name in ("args", "kwargs"):
                self.initial[name] = conf.filtered(getattr(self.instance, name))

    def _post_clean(self):
        # Model validation would repeat the service's errors (the cron/interval
        # check constraint); run it only on data the service accepted.
        if self.schedule_data is not None:
            super()._post_clean()

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        fields = {f: data.get(f) for f in schedules.EDITABLE if f in self.fields}
        fields["cron"] = fields.get("cron") or ""
        fields["args"] = [] if fields.get("args") is None else fields["args"]
        fields["kwargs"] = {} if fields.get("kwargs") is None else fields["kwargs"]
        instance = self.instance if self.instance.pk else None
        if instance is not None:
            fields["args"] = conf.unfiltered(fields["args"], instance.args)
            fields["kwargs"] = conf.unfiltered(fields["kwargs"], instance.kwargs)
        try:
            self.schedule_data = schedules.clean(fields, instance=instance)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                target = field if field in self.fields else None
                for error in errors:
                    self.add_error(target, error)
            return data
        data.update({f: v for f, v in self.schedule_data.items() if f in self.fields})
        return data


@admin.register(Schedule)
class ScheduleAdmin(AuditHistoryMixin, ComingRunsMixin, SchedulerModelAdmin):
    audit_object_type = "schedule"

    form = ScheduleForm
    list_display = ["name", "task_name", "timetable", "next_run", "last_run", "enabled"]
    list_display_links = ["name"]
    list_editable = ["enabled"]
    list_filter = ["enabled", "misfire_policy"]
    search_fields = ["name", "task"]
    ordering = ["name"]
    actions = ["run_now", "enable", "disable"]
    # Times in the admin's one format (formatting.when_html), not Django's.
    state_fields = [
        "timetable",
        "next_run",
        "last_run",
        "last_job_link",
        "jobs_link",
        "created_display",
        "updated_display",
    ]
    readonly_fields = [*state_fields, "coming_runs"]
    fieldsets = [
        (None, {"fields": ["name", "task", "args", "kwargs", "enabled"]}),
        (
            "Timetable",
            {
                "fields": [
                    "cron",
                    "interval_seconds",
                    "timezone",
                    "coming_runs",
                    "misfire_policy",
                    "start_at",
                    "end_at",
                ],
                "description": "Give a cron expression or an interval in seconds, not both.",
            },
        ),
        ("Jobs", {"fields": ["queue", "priority", "max_attempts", "timeout"]}),
        ("State", {"fields": state_fields}),
    ]

    class Media:
        css = {"all": ["scheduler_app/css/admin.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("last_job")

    @admin.display(description="task", ordering="task")
    def task_name(self, obj):
        module, _, name = obj.task.rpartition(".")
        return format_html('<span title="{}">{}</span>', obj.task, name)

    @admin.display(description="schedule")
    def timetable(self, obj):
        if obj is None or obj.pk is None:
            return "–"
        return schedules.describe(obj)

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, obj):
        if obj.pk is None:  # the add page
            return "–"
        if not obj.enabled:
            return "disabled"
        if obj.next_run_at is None:
            return "ended"
        return when_html(obj.next_run_at, late=True)

    @admin.display(description="last run", ordering="last_run_at")
    def last_run(self, obj):
        if obj.pk is None:
            return "–"
        if obj.last_run_at is None:
            return "never"
        when = when_html(obj.last_run_at)
        job = obj.last_job
        if job is None:
            return when
        return format_html(
            '{} · <a href="{}">{}</a>',
            when,
            reverse("admin:scheduler_app_job_change", args=[job.pk]),
            status_badge(job.status),
        )

    @admin.display(description="created at")
    def created_display(self, obj):
        return when_html(obj.created_at if obj.pk else None)

    @admin.display(description="updated at")
    def updated_display(self, obj):
        return when_html(obj.updated_at if obj.pk else None)

    @admin.display(description="last job")
    def last_job_link(self, obj):
        if obj.last_job is None:
            return "–"
        return format_html(
            '<a href="{}">#{}</a> ({})',
            reverse("admin:scheduler_app_job_change", args=[obj.last_job.pk]),
            obj.last_job.pk,
            obj.last_job.status,
        )

    @admin.display(description="jobs")
    def jobs_link(self, obj):
        if obj.pk is None:
            return "–"
        url = reverse("admin:scheduler_app_job_changelist") + f"?schedule={obj.pk}"
        return format_html('<a href="{}">All jobs of this schedule</a>', url)

    def save_model(self, request, obj, form, change):
        data = getattr(form, "schedule_data", None)
        with transaction.atomic():
            if data is None:
                # The change list's "enabled" toggle: a form with that one field.
                saved = schedules.update(obj.pk, enabled=obj.enabled)
                audit(request, "enable" if obj.enabled else "disable", "schedule", object_id=obj.pk)
            elif change:
                saved = schedules.update(obj.pk, **data)
                changed = {k: v for k, v in data.items() if k in form.changed_data}
                audit(request, "edit", "schedule", object_id=obj.pk, detail=changed)
            else:
                saved = schedules.create(**data)
                audit(request, "create", "schedule", object_id=saved.pk, detail=data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change):
        pass  # no relations to save; the service saved everything

    def delete_model(self, request, obj):
        with transaction.atomic():
            schedules.delete(obj.pk)
            audit(request, "delete", "schedule", object_id=obj.pk, detail={"name": obj.name})

    def delete_queryset(self, request, queryset):
        for pk, name in list(queryset.values_list("pk", "name")):
            try:
                with transaction.atomic():
                    schedules.delete(pk)
                    audit(request, "delete", "schedule", object_id=pk, detail={"name": name})
            except Schedule.DoesNotExist:
                pass

    @admin.action(description="Run selected schedules now", permissions=["change"])
    def run_now(self, request, queryset):
        jobs = []
        for pk in queryset.values_list("pk", flat=True):
            with transaction.atomic():
                jobs.append(schedules.run_now(pk, created_by=request.user))
                audit(request, "run_now", "schedule", object_id=pk, detail={"job": jobs[-1].pk})
        self.message_user(
            request,
            f"Enqueued {len(jobs)} job{'s' if len(jobs) != 1 else ''}: " + ", ".join(f"#{j.pk}" for j in jobs),
            messages.SUCCESS,
        )

    @admin.action(description="Enable selected schedules", permissions=["change"])
    def enable(self, request, queryset):
        changed = self._set_enabled(request, queryset, True)
        self.message_user(request, f"Enabled {changed} schedule{'s' if changed != 1 else ''}.", messages.SUCCESS)

    @admin.action(description="Disable selected schedules", permissions=["change"])
    def disable(self, request, queryset):
        changed = self._set_enabled(request, queryset, False)
        self.message_user(request, f"Disabled {changed} schedule{'s' if changed != 1 else ''}.", messages.SUCCESS)

    @staticmethod
    def _set_enabled(request, queryset, enabled):
        ids = list(queryset.values_list("pk", flat=True))
        with transaction.atomic():
            changed = schedules.set_enabled_many(ids, enabled, now=timezone.now())
            action = "enable" if enabled else "disable"
            if len(ids) == 1:
                audit(request, action, "schedule", object_id=ids[0], count=changed)
            else:
                audit(request, f"bulk_{action}", "schedule", filter=list_filter_of(request, ids), count=changed)
        return changed
