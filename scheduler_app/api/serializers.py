"""Serializers of the REST API: how jobs, tasks, workers and queues look on the wire.

Write serializers only check the shape of a request (types, ranges, which
keys are allowed); the lifecycle service has the last word on a job and
creates it.
"""

from collections.abc import Mapping
from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler_app import conf, limits, registry
from scheduler_app.models import PRIORITY_MAX, PRIORITY_MIN, Job, Worker

# Bounds that keep later date and time arithmetic (in the dispatcher too)
# far from datetime's year-9999 overflow.
MAX_DELAY_SECONDS = 100 * 365 * 24 * 3600
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600
# args/kwargs nesting; deeper documents are refused before anything
# recursive (json.dumps, the database's JSON parser) sees them.
MAX_JSON_DEPTH = 64


class StrictKeysMixin:
    """Refuse keys the serializer does not declare, naming each of them."""

    unknown_key_message = "Unknown field."

    def to_internal_value(self, data):
        unknown = {}
        if isinstance(data, Mapping):
            unknown = {
                str(key): [self.unknown_key_message] for key in data if key not in self.fields
            }
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, Mapping):
                raise serializers.ValidationError({**unknown, **exc.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 datetime that must carry a UTC offset (or Z)."""

    default_error_messages = {
        "naive": "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00).",
    }

    def enforce_timezone(self, value):
        if timezone.is_naive(value):
            self.fail("naive")
        return super().enforce_timezone(value)


def check_json_value(value, *, max_depth=MAX_JSON_DEPTH):
    """Return an error message if ``value`` cannot be stored as JSON text, else None.

    Catches what the JSON parser lets through but the databases refuse:
    NUL characters (PostgreSQL's jsonb) and lone surrogates (UTF-8), and
    nesting deep enough to exhaust the recursion limit later on.
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"Nested more than {max_depth} levels deep."
        if isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth))
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "Text may not contain NUL (\\u0000) characters."
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "Text may not contain lone surrogate characters."
    return None


class _JSONContainerField(serializers.JSONField):
    container = dict
    default_error_messages = {"type": "Must be a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, self.container):
            self.fail("type")
        problem = check_json_value(data)
        if problem:
            raise serializers.ValidationError(problem, code="invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "array", "items": {}})
class JSONListField(_JSONContainerField):
    """A JSON array of any JSON values."""

    container = list
    default_error_messages = {"type": "Must be a JSON array (a list of positional arguments)."}


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(_JSONContainerField):
    """A JSON object of any JSON values."""

    container = dict
    default_error_messages = {"type": "Must be a JSON object (keyword arguments by name)."}


class JobSerializer(serializers.ModelSerializer):
    """A job as the API shows it."""

    url = serializers.HyperlinkedIdentityField(view_name="api:job-detail")
    created_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Username of who created the job; null when created by code.",
    )
    args = JSONListField(read_only=True)
    kwargs = JSONObjectField(read_only=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "task",
            "args",
            "kwargs",
            "queue",
            "priority",
            "execute_at",
            "status",
            "attempts",
            "max_attempts",
            "timeout",
            "unique_key",
            "result",
            "errors",
            "cancel_requested",
            "worker",
            "created_by",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "schedule",
        ]
        read_only_fields = fields


class JobCreateSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/ (and of each item of a bulk request)."""

    task = serializers.ChoiceField(
        choices=[],
        help_text="A registered task (GET /api/tasks/ lists them).",
    )
    args = JSONListField(required=False, help_text="Positional arguments (default []).")
    kwargs = JSONObjectField(required=False, help_text="Keyword arguments (default {}).")
    execute_at = AwareDateTimeField(
        required=False,
        allow_null=True,
        help_text="When to run, ISO 8601 with an offset. Not with delay. Default: now.",
    )
    delay = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_DELAY_SECONDS,
        help_text="Run this many seconds from now. Not with execute_at.",
    )
    priority = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text="Higher runs first. Default: the task's.",
    )
    queue = serializers.ChoiceField(
        choices=[],
        required=False,
        allow_null=True,
        help_text="A queue the backend serves. Default: the task's.",
    )
    max_attempts = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=limits.MAX_ATTEMPTS_MAX
    )
    timeout = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_TIMEOUT_SECONDS,
        help_text="Seconds an attempt may run (greater than 0). Default: no limit.",
    )
    unique_key = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=255,
        help_text="At most one pending or running job per key; a match returns that job.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Read at instantiation: the registry and settings.TASKS are only
        # complete once apps are ready, and tests may override them.
        names = registry.names()
        queues = sorted(conf.known_queues())
        self.fields["task"].choices = names
        self.fields["task"].error_messages["invalid_choice"] = (
            '"{input}" is not a registered task. GET /api/tasks/ lists them: '
            + ", ".join(names)
            + "."
        )
        self.fields["queue"].choices = queues
        self.fields["queue"].error_messages["invalid_choice"] = (
            "Unknown queue \"{input}\". Known queues: " + ", ".join(queues) + "."
        )

    def validate_timeout(self, value):
        if value is not None and value <= 0:
            raise serializers.ValidationError("Must be greater than 0.")
        return value

    def validate(self, attrs):
        delay = attrs.pop("delay", None)
        if delay is not None:
            if attrs.get("execute_at") is not None:
                raise serializers.ValidationError(
                    {"delay": ["Give either execute_at or delay, not both."]}
                )
            attrs["execute_at"] = timezone.now() + timedelta(seconds=delay)
        return attrs

    @staticmethod
    def enqueue_spec(validated_data):
        """Return the lifecycle's keyword arguments for one validated body (None dropped)."""
        data = dict(validated_data)
        spec = {
            "task": data.pop("task"),
            "args": data.pop("args", []),
            "kwargs": data.pop("kwargs", {}),
        }
        spec.update({k: v for k, v in data.items() if v is not None})
        return spec


class BoundedListField(serializers.ListField):
    """A ListField that checks its length before validating any item."""

    def to_internal_value(self, data):
        if isinstance(data, list) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class BulkCreateSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/bulk/."""

    jobs = BoundedListField(
        child=JobCreateSerializer(),
        allow_empty=False,
        max_length=limits.BULK_MAX,
        help_text=f"1 to {limits.BULK_MAX} job bodies, as for POST /api/jobs/.",
    )

    def enqueue_specs(self):
        """Return one lifecycle spec per job, in request order."""
        return [JobCreateSerializer.enqueue_spec(data) for data in self.validated_data["jobs"]]


class RescheduleSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of PATCH /api/jobs/{id}/: only execute_at and priority."""

    unknown_key_message = "Cannot be changed: a PATCH may only set execute_at and priority."

    execute_at = AwareDateTimeField(required=False)
    priority = serializers.IntegerField(
        required=False, min_value=PRIORITY_MIN, max_value=PRIORITY_MAX
    )

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give execute_at, priority or both.")
        return attrs


class TaskSerializer(serializers.Serializer):
    """A registered task."""

    name = serializers.CharField()
    queue = serializers.CharField()
    priority = serializers.IntegerField()
    doc = serializers.CharField()
    signature = serializers.CharField()


class WorkerSerializer(serializers.ModelSerializer):
    """A dispatcher process (`manage.py rundispatcher`)."""

    queues = serializers.ListField(child=serializers.CharField(), read_only=True)
    slots = serializers.DictField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text='Worker slots per queue, or {"*": n} for one pool shared by its queues.',
    )
    alive = serializers.BooleanField(read_only=True)

    class Meta:
        model = Worker
        fields = [
            "id",
            "hostname",
            "pid",
            "queues",
            "slots",
            "started_at",
            "last_heartbeat",
            "alive",
            "running",
            "processed",
            "failed",
        ]
        read_only_fields = fields


class QueueSerializer(serializers.Serializer):
    """One queue and its load."""

    name = serializers.CharField()
    paused = serializers.BooleanField()
    pending = serializers.IntegerField()
    due = serializers.IntegerField()
    running = serializers.IntegerField()
    oldest_due_lag_seconds = serializers.FloatField(
        help_text="Seconds the oldest due pending job has waited (0 when none)."
    )
    slots = serializers.IntegerField(help_text="Worker slots alive dispatchers give this queue.")


class QueueCountsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    due = serializers.IntegerField()
    running = serializers.IntegerField()


class ThroughputSerializer(serializers.Serializer):
    last_minute = serializers.IntegerField()
    last_hour = serializers.IntegerField()


class WorkerCountsSerializer(serializers.Serializer):
    alive = serializers.IntegerField()


class StatsSerializer(serializers.Serializer):
    """The GET /api/stats/ document."""

    jobs = serializers.DictField(child=serializers.IntegerField(), help_text="Jobs per status.")
    queues = serializers.DictField(child=QueueCountsSerializer())
    oldest_due_lag_seconds = serializers.FloatField()
    throughput = ThroughputSerializer(help_text="Jobs finished (succeeded or failed).")
    workers = WorkerCountsSerializer()
