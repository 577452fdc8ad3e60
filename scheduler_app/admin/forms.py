"""Admin forms for jobs: create one (through lifecycle.enqueue) and reschedule one.

The rules (``validation.fields``; ``lifecycle.building`` for the task and
the queue) are the one authority on
what a valid job is. These forms hand what a person typed to the rule of
each field (``RuleFormField``: the rule parses the text), ask ``build_job``
about the whole, and show every error inline on its field, worded as the
API, the commands and ``task.enqueue()`` word it. They never save a Job
themselves: the ModelAdmin calls ``lifecycle.enqueue`` /
``lifecycle.reschedule``.
"""

import json
from datetime import datetime

from django import forms
from django.contrib.admin import widgets as admin_widgets
from django.core.exceptions import ValidationError
from django.utils import timezone

from .. import conf, lifecycle, registry
from ..lifecycle.building import QUEUE, TASK
from ..lifecycle.depends_on import unknown as unknown_dependencies
from ..lifecycle.states import allowed_from, refusal
from ..models import Job
from ..sql.readable import in_zone
from ..validation.fields import ARGS, DEPENDS_ON, EXECUTE_AT, KWARGS, MAX_ATTEMPTS, PRIORITY, TIMEOUT, UNIQUE_KEY
from ..validation.labels import TAGS
from ..vocabulary.bounds import TAGS_MAX


def _task_label(task):
    info = registry.describe(task)
    return f"{info['name']}{info['signature']}"


class TaskSelect(forms.Select):
    """A select of registered tasks whose options carry each task's defaults.

    The admin's job_form.js shows the chosen task's signature, docstring and
    ``@options``, and puts its defaults (queue, priority, max_attempts,
    timeout) in the placeholders of those fields.
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
                    "data-signature": info["name"].rpartition(".")[2] + info["signature"],
                    "data-options": json.dumps(info["options"]),
                }
            )
        return option


class SplitDateTime(admin_widgets.AdminSplitDateTime):
    """The admin's date and time boxes, which show a time the site's zone has no date for in UTC.

    A row written around the service may hold the last instant Python knows
    (``readable``); in Asia/Tokyo that is in year 10000, and Django's widget
    raised OverflowError (a 500) where the form should show it.
    """

    def decompress(self, value):
        if isinstance(value, datetime) and timezone.is_aware(value):
            value = in_zone(value)
            return [value.date(), value.time()]
        if not isinstance(value, datetime):  # text from the query string (?execute_at=...): not a time to show
            return [None, None]
        return super().decompress(value)


def _field_error(exc):
    """Return a rule's ValidationError as the error of the one field it is about."""
    messages = [m for ms in exc.message_dict.values() for m in ms] if hasattr(exc, "error_dict") else exc.messages
    return ValidationError(messages)


class RuleFormField(forms.CharField):
    """Text a rule parses: an empty box is None (the default); anything else is the rule's to judge."""

    def __init__(self, rule, **kwargs):
        self.rule = rule
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return self.rule.parse(value)
        except ValidationError as exc:
            raise _field_error(exc) from None


def checked_by(rule):
    """Return a form field validator that asks ``rule`` (for values a widget already parsed)."""

    def validate(value):
        try:
            rule.check(value)
        except ValidationError as exc:
            raise _field_error(exc) from None

    return validate


class RuleChoiceField(forms.ChoiceField):
    """A select whose value the rule judges (the choices are only what the page offers)."""

    def __init__(self, rule, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("validators", [checked_by(rule)])
        super().__init__(**kwargs)

    def validate(self, value):
        if self.required and value in self.empty_values:
            raise ValidationError(self.error_messages["required"], code="required")


class JSONTextField(RuleFormField):
    """A JSON document typed as text (args, kwargs); empty means an empty list or object."""

    def __init__(self, rule, **kwargs):
        kwargs.setdefault(
            "widget",
            forms.Textarea(attrs={"rows": 3, "cols": 60, "class": "vLargeTextField json-input", "spellcheck": "false"}),
        )
        super().__init__(rule, **kwargs)

    def prepare_value(self, value):
        import json

        if isinstance(value, (list, dict)):
            return json.dumps(value)
        return value

    def to_python(self, value):
        parsed = super().to_python(value)
        return self.rule.kind() if parsed is None else parsed


def encodable_data(data):
    """Return form data whose text can be encoded as UTF-8: lone surrogates become U+FFFD.

    A form shows what was typed back in its inputs and error messages; one
    lone surrogate would make the whole page unencodable (a 500). Django's
    request parser already decodes bodies this way; data built in code
    (a QueryDict, a dict) gets the same treatment here.
    """
    if data is None or not hasattr(data, "lists"):
        return data
    fixed = None
    for key, values in data.lists():
        if all(not isinstance(v, str) or _encodes(v) for v in values):
            continue
        fixed = fixed if fixed is not None else data.copy()
        fixed.setlist(
            key,
            [
                v
                if not isinstance(v, str) or _encodes(v)
                else v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                for v in values
            ],
        )
    return data if fixed is None else fixed


def _encodes(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class EncodableDataMixin:
    """For a form: bind ``encodable_data(data)`` instead of ``data``."""

    def __init__(self, data=None, *args, **kwargs):
        super().__init__(encodable_data(data), *args, **kwargs)


class _LifecycleValidatedForm(EncodableDataMixin, forms.ModelForm):
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


def zone_help(text):
    """Return a date field's help text, naming the zone its boxes are in (the site's TIME_ZONE)."""
    return f"In {timezone.get_current_timezone_name()} (the site's time zone). {text}"


def offer_shortcuts(field):
    """Mark a date-and-time field for job_form.js: its shortcuts (in 5 minutes, 1 hour, tomorrow 09:00)
    and the time in the browser's zone beside the site's."""
    field.widget.widgets[0].attrs["data-site-zone"] = timezone.get_current_timezone_name()


class JobIdsWidget(forms.TextInput):
    """Job ids typed as text (``12, 15``), with the admin's raw-id lookup: a magnifier opens the
    job list in a popup, and each job picked there is added to the box."""

    template_name = "admin/scheduler_app/job/ids_widget.html"

    def __init__(self, attrs=None):
        super().__init__({"class": "vManyToManyRawIdAdminField", "placeholder": "e.g. 12, 15", **(attrs or {})})

    def get_context(self, name, value, attrs):
        from django.urls import reverse

        context = super().get_context(name, value, attrs)
        context["lookup_url"] = reverse("admin:scheduler_app_job_changelist") + "?_to_field=id"
        return context


class TagsField(forms.CharField):
    """Tags typed as comma-separated text (``billing, nightly``); a list of strings."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        text = super().to_python(value) or ""
        tags = [t.strip() for t in text.split(",") if t.strip()]
        try:
            return list(TAGS.check(tags))
        except ValidationError as exc:
            raise _field_error(exc) from None


class JobAddForm(_LifecycleValidatedForm):
    task = RuleChoiceField(
        TASK,
        required=True,
        widget=TaskSelect,
        help_text="Only tasks defined with @task in an installed app's tasks.py can be chosen.",
    )
    args = JSONTextField(
        ARGS, label="Args", initial="[]", help_text='Positional arguments as a JSON list, e.g. <code>[1, "two"]</code>.'
    )
    kwargs = JSONTextField(
        KWARGS,
        label="Kwargs",
        initial="{}",
        help_text='Keyword arguments as a JSON object, e.g. <code>{"seconds": 5}</code>.',
    )
    execute_at = forms.SplitDateTimeField(
        required=False,
        widget=SplitDateTime,
        validators=[checked_by(EXECUTE_AT)],
        label="Execute at",
        help_text="Leave empty to run now (as soon as a worker slot is free).",
    )
    priority = RuleFormField(
        PRIORITY, help_text=f"{PRIORITY.low}..{PRIORITY.high}, higher runs first. Empty: the task's default."
    )
    queue = RuleChoiceField(QUEUE, help_text="Empty: the task's queue.")
    max_attempts = RuleFormField(
        MAX_ATTEMPTS, help_text="Attempts before the job fails for good. Empty: the scheduler's default."
    )
    timeout = RuleFormField(
        TIMEOUT, help_text="Seconds an attempt may run, or a duration (90s, 30m, 1h30m). Empty: no limit."
    )
    unique_key = RuleFormField(
        UNIQUE_KEY,
        strip=False,
        help_text="Optional. While a pending, waiting or running job holds this key (or a job made with "
        "unique_for, for its period), no second one is created.",
    )
    depends_on = RuleFormField(
        DEPENDS_ON,
        widget=JobIdsWidget,
        label="Depends on",
        help_text="Ids of jobs that must succeed first, separated by commas (the magnifier picks them from the job list). "
        "Empty: none; the job waits until they have succeeded.",
    )
    tags = TagsField(
        label="Tags",
        help_text=f"Optional labels, separated by commas (at most {TAGS_MAX}), e.g. <code>billing, nightly</code>.",
    )

    class Meta:
        model = Job
        fields = ["task", "args", "kwargs", "execute_at", "priority", "queue", "max_attempts", "timeout", "unique_key"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "---------")] + [
            (registry.name_of(t), _task_label(t)) for t in registry.all_tasks()
        ]
        self.fields["queue"].choices = [("", "(the task's queue)")] + [(q, q) for q in sorted(conf.known_queues())]
        self.fields["execute_at"].help_text = zone_help(self.fields["execute_at"].help_text)
        offer_shortcuts(self.fields["execute_at"])
        self.job_options = None
        self.tags = []

    def clean(self):
        data = super().clean()
        options = {
            "execute_at": data.get("execute_at"),
            "priority": data.get("priority"),
            "queue": data.get("queue") or None,
            "max_attempts": data.get("max_attempts"),
            "timeout": data.get("timeout"),
            "unique_key": data.get("unique_key") or None,
            "depends_on": data.get("depends_on") or None,
        }
        self.tags = data.get("tags") or []
        if options["depends_on"]:
            # Ids of no job are refused by enqueue (in its transaction); say so on the box before.
            for message in unknown_dependencies(options["depends_on"]):
                self.add_error("depends_on", message)
        try:
            self.instance = lifecycle.build_job(
                data.get("task"), data.get("args", []), data.get("kwargs", {}), **options
            )
        except ValidationError as exc:
            self._add_lifecycle_errors(exc)
        else:
            self.job_options = {
                "task": data["task"],
                "args": data.get("args", []),
                "kwargs": data.get("kwargs", {}),
                **options,
            }
        return data


class JobRescheduleForm(_LifecycleValidatedForm):
    """Change when a pending job runs and its priority; nothing else."""

    execute_at = forms.SplitDateTimeField(widget=SplitDateTime, validators=[checked_by(EXECUTE_AT)], label="Execute at")
    priority = RuleFormField(PRIORITY, required=True, help_text=f"{PRIORITY.low}..{PRIORITY.high}, higher runs first.")

    class Meta:
        model = Job
        fields = ["execute_at", "priority"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["execute_at"].help_text = zone_help("")
        offer_shortcuts(self.fields["execute_at"])

    def clean(self):
        data = super().clean()
        if self.instance.pk is not None:
            status = Job.objects.filter(pk=self.instance.pk).values_list("status", flat=True).first()
            if status not in allowed_from("reschedule"):
                raise ValidationError(refusal("reschedule", self.instance.pk, status), code="not_pending")
        return data
