"""Serializers of the REST API: how jobs, tasks, workers and queues look on the wire.

Write serializers check only the shape of a request (which keys are
allowed); every value goes to the lifecycle's rules through ``RuleField``,
so the API refuses exactly what the admin, the commands and
``task.enqueue()`` refuse, with the same messages.
"""

from rest_framework import serializers

from scheduler_app import limits
from scheduler_app.lifecycle import validation as rules
from scheduler_app.models import Job, Worker

from .fields import (
    JSONListField,
    JSONObjectField,
    ProgressField,
    RuleField,
    StrictKeysMixin,
)


class JobSerializer(serializers.ModelSerializer):
    """A job as the API shows it."""

    url = serializers.HyperlinkedIdentityField(view_name="scheduler_api:job-detail")
    created_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Username of who created the job; null when created by code.",
    )
    args = JSONListField(read_only=True)
    kwargs = JSONObjectField(read_only=True)
    progress = ProgressField()

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
            "progress",
            "worker",
            "created_by",
            "created_at",
            "updated_at",
            "started_at",
            "last_attempted_at",
            "finished_at",
            "schedule",
            "logs_count",
        ]
        read_only_fields = fields


class JobCreateSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/ (and of each item of a bulk request)."""

    task = RuleField(rules.TASK, required=True, help_text="A registered task (GET /api/tasks/ lists them).")
    args = RuleField(rules.ARGS, help_text="Positional arguments (default []).")
    kwargs = RuleField(rules.KWARGS, help_text="Keyword arguments (default {}).")
    execute_at = RuleField(
        rules.EXECUTE_AT, text=True, help_text="When to run, ISO 8601 with an offset. Not with delay. Default: now."
    )
    delay = RuleField(rules.DELAY, help_text="Run this many seconds from now. Not with execute_at.")
    priority = RuleField(rules.PRIORITY, help_text="Higher runs first. Default: the task's.")
    queue = RuleField(rules.QUEUE, help_text="A queue the backend serves. Default: the task's.")
    max_attempts = RuleField(rules.MAX_ATTEMPTS, help_text="Attempts before the job fails for good. Default: the setting's.")
    timeout = RuleField(rules.TIMEOUT, help_text="Seconds an attempt may run. Default: no limit.")
    unique_key = RuleField(
        rules.UNIQUE_KEY, help_text="At most one pending or running job per key; a match returns that job."
    )

    @staticmethod
    def enqueue_spec(validated_data):
        """Return the lifecycle's keyword arguments for one validated body (None dropped)."""
        return {k: v for k, v in validated_data.items() if v is not None}


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
        min_length=1,  # as allow_empty says, for the schema
        max_length=limits.BULK_MAX,
        help_text=f"1 to {limits.BULK_MAX} job bodies, as for POST /api/jobs/.",
    )

    def enqueue_specs(self):
        """Return one lifecycle spec per job, in request order."""
        return [JobCreateSerializer.enqueue_spec(data) for data in self.validated_data["jobs"]]


class RescheduleSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of PATCH /api/jobs/{id}/: only execute_at and priority."""

    unknown_key_message = "Cannot be changed: a PATCH may only set execute_at and priority."
    openapi_extra = {"minProperties": 1}

    execute_at = RuleField(rules.EXECUTE_AT, text=True, allow_null=False)
    priority = RuleField(rules.PRIORITY, allow_null=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give execute_at, priority or both.")
        return attrs


class TaskOptionsSerializer(serializers.Serializer):
    max_attempts = serializers.IntegerField(required=False)
    timeout = serializers.FloatField(required=False)
    backoff = serializers.FloatField(required=False, help_text="Base seconds, doubled per attempt.")
    retry_on = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Exception classes that are retried; others fail at once."
    )
    unique = serializers.JSONField(
        required=False, help_text="true (task and arguments), or the path of the callable that makes the key."
    )


class TaskSerializer(serializers.Serializer):
    """A registered task."""

    name = serializers.CharField()
    queue = serializers.CharField()
    priority = serializers.IntegerField()
    doc = serializers.CharField()
    signature = serializers.CharField(help_text="The arguments a job must bind to, e.g. (account_id, note='').")
    is_async = serializers.BooleanField()
    takes_context = serializers.BooleanField()
    options = TaskOptionsSerializer(
        help_text="The task's @options (only those it sets); a job's own fields override them."
    )


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
