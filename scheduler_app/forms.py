"""Admin forms for jobs: create one (through lifecycle.enqueue) and reschedule one.

``lifecycle.build_job`` and the lifecycle validators are the one authority on
what a valid job is. These forms parse what a person typed (JSON text, a
split date/time), run those validators, and turn every error into an inline
error on the field it belongs to. They never save a Job themselves: the
ModelAdmin calls ``lifecycle.enqueue`` / ``lifecycle.reschedule``.
"""

import json

from django import forms
from django.contrib.admin import widgets as admin_widgets
from django.core.exceptions import ValidationError

from . import conf, lifecycle, limits, registry
from .models import PRIORITY_MAX, PRIORITY_MIN, Job, JobStatus


def _task_label(task):
    info = registry.describe(task)
    return f"{info['name']}{info['signature']}"


class TaskSelect(forms.Select):
    """A select of registered tasks whose options carry each task's defaults.

    The admin's job_form.js shows the chosen task's docstring and puts its
    default queue and priority in the placeholders of those fields.
    """

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        if registry.is_registered(value):
            info = registry.describe(registry.get(value))
            option["attrs"].update(
                {
                    "data-queue": info["queue"],
                    "data-priority": info["priority"],
                    "data-doc": info["doc"],
                }
            )
        return option


class JSONTextField(forms.CharField):
    """A JSON document typed as text; ``kind`` is list or dict."""

    def __init__(self, *, kind, **kwargs):
        self.kind = kind
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 3, "cols": 60, "class": "vLargeTextField json-input", "spellcheck": "false"}))
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, (list, dict)):
            return json.dumps(value)
        return value

    def to_python(self, value):
        value = super().to_python(value).strip()
        if not value:
            return self.kind()
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                "Not valid JSON: %(error)s (line %(line)s, column %(column)s).",
                code="invalid_json",
                params={"error": exc.msg, "line": exc.lineno, "column": exc.colno},
            ) from None
        if not isinstance(parsed, self.kind):
            expected = "a JSON list, e.g. [1, 2]" if self.kind is list else 'a JSON object, e.g. {"name": "value"}'
            raise ValidationError("Must be %(expected)s.", code="invalid_type", params={"expected": expected})
        return parsed


class _LifecycleValidatedForm(forms.ModelForm):
    """A ModelForm whose instance is validated by the lifecycle, not by Model.full_clean."""

    def _post_clean(self):
        # Model.full_clean would repeat the lifecycle's checks with other
        # messages (and reject an empty execute_at that means "now").
        pass

    def _add_lifecycle_errors(self, exc):
        for field, messages in exc.message_dict.items():
            target = field if field in self.fields else None
            if target is not None and target in self.errors:
                continue  # the field's own error already says what is wrong
            for message in messages:
                self.add_error(target, message)


class JobAddForm(_LifecycleValidatedForm):
    task = forms.ChoiceField(
        widget=TaskSelect,
        help_text="Only tasks defined with @task in an installed app's tasks.py can be chosen.",
    )
    args = JSONTextField(kind=list, label="Args", initial="[]", help_text='Positional arguments as a JSON list, e.g. <code>[1, "two"]</code>.')
    kwargs = JSONTextField(kind=dict, label="Kwargs", initial="{}", help_text='Keyword arguments as a JSON object, e.g. <code>{"seconds": 5}</code>.')
    execute_at = forms.SplitDateTimeField(
        required=False,
        widget=admin_widgets.AdminSplitDateTime,
        label="Execute at",
        help_text="Leave empty to run now (as soon as a worker slot is free).",
    )
    priority = forms.IntegerField(
        required=False,
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text=f"{PRIORITY_MIN}..{PRIORITY_MAX}, higher runs first. Empty: the task's default.",
    )
    queue = forms.ChoiceField(required=False, help_text="Empty: the task's queue.")
    max_attempts = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=limits.MAX_ATTEMPTS_MAX,
        help_text="Attempts before the job fails for good. Empty: the scheduler's default.",
    )
    timeout = forms.FloatField(
        required=False,
        help_text="Seconds an attempt may run. Empty: no limit.",
    )
    unique_key = forms.CharField(
        required=False,
        max_length=255,
        help_text="Optional. While a pending or running job holds this key, no second one is created.",
    )

    class Meta:
        model = Job
        fields = ["task", "args", "kwargs", "execute_at", "priority", "queue", "max_attempts", "timeout", "unique_key"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "---------")] + [
            (registry.name_of(t), _task_label(t)) for t in registry.all_tasks()
        ]
        self.fields["queue"].choices = [("", "(the task's queue)")] + [
            (q, q) for q in sorted(conf.known_queues())
        ]
        self.job_options = None

    def clean(self):
        data = super().clean()
        options = {
            "execute_at": data.get("execute_at"),
            "priority": data.get("priority"),
            "queue": data.get("queue") or None,
            "max_attempts": data.get("max_attempts"),
            "timeout": data.get("timeout"),
            "unique_key": data.get("unique_key") or None,
        }
        try:
            self.instance = lifecycle.build_job(
                data.get("task"), data.get("args", []), data.get("kwargs", {}), **options
            )
        except ValidationError as exc:
            self._add_lifecycle_errors(exc)
        else:
            self.job_options = {"task": data["task"], "args": data.get("args", []), "kwargs": data.get("kwargs", {}), **options}
        return data


class JobRescheduleForm(_LifecycleValidatedForm):
    """Change when a pending job runs and its priority; nothing else."""

    execute_at = forms.SplitDateTimeField(widget=admin_widgets.AdminSplitDateTime, label="Execute at")
    priority = forms.IntegerField(
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text=f"{PRIORITY_MIN}..{PRIORITY_MAX}, higher runs first.",
    )

    class Meta:
        model = Job
        fields = ["execute_at", "priority"]

    def clean(self):
        data = super().clean()
        for field, validator in (("execute_at", lifecycle.validate_execute_at), ("priority", lifecycle.validate_priority)):
            if data.get(field) is not None:
                try:
                    validator(data[field])
                except ValidationError as exc:
                    self._add_lifecycle_errors(exc)
        if self.instance.pk is not None:
            status = Job.objects.filter(pk=self.instance.pk).values_list("status", flat=True).first()
            if status != JobStatus.PENDING:
                raise ValidationError(
                    "Only pending jobs can be rescheduled; this job is now %(status)s.",
                    code="not_pending",
                    params={"status": status or "deleted"},
                )
        return data
