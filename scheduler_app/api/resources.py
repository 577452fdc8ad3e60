"""Serializers of the REST API's read-mostly resources: tasks, dispatchers (workers), queues and the stats.

Jobs' serializers are in ``api.serializers``; the same rules apply: every
value a request sets goes to the lifecycle's rules through ``RuleField``.
"""

from rest_framework import serializers

from ..maintenance import leader
from ..models import Worker
from ..sql import readable
from ..validation.fields import CONCURRENCY_LIMIT, RATE_LIMIT, RATE_PERIOD
from .fields import RuleField, StrictKeysMixin, TimesMixin


class TaskOptionsSerializer(serializers.Serializer):
    max_attempts = serializers.IntegerField(required=False)
    timeout = serializers.FloatField(required=False)
    backoff = serializers.FloatField(required=False, help_text="Base seconds, doubled per attempt.")
    retry_on = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Exception classes that are retried; others fail at once.",
    )
    unique = serializers.JSONField(
        required=False, help_text="true (task and arguments), or the path of the callable that makes the key."
    )
    unique_for = serializers.FloatField(required=False, help_text="Seconds a unique key stays taken.")
    tags = serializers.ListField(child=serializers.CharField(), required=False, help_text="Tags of the task's jobs.")


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


class StoredQueuesField(serializers.ListField):
    """A dispatcher's queue names, read by ``readable.worker_queues`` (a row may hold any JSON)."""

    def to_representation(self, data):
        return super().to_representation(readable.worker_queues(data))


class StoredSlotsField(serializers.DictField):
    """A dispatcher's slots per queue, read by ``readable.worker_slots`` (a row may hold any JSON)."""

    def to_representation(self, value):
        return super().to_representation(readable.worker_slots(value))


class WorkerSerializer(TimesMixin, serializers.ModelSerializer):
    """A dispatcher process (`manage.py rundispatcher`)."""

    queues = StoredQueuesField(child=serializers.CharField(), read_only=True)
    slots = StoredSlotsField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text='Worker slots per queue, or {"*": n} for one pool shared by its queues.',
    )
    alive = serializers.BooleanField(read_only=True)
    leader = serializers.SerializerMethodField(
        help_text="Whether this dispatcher leads the maintenance (rescue, expiry, retention): true for one live dispatcher."
    )

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
            "leader",
            "running",
            "processed",
            "failed",
        ]
        read_only_fields = fields

    def get_leader(self, worker) -> bool:
        return leader.leads(worker)


class QueueSerializer(serializers.Serializer):
    """One queue, its load, and its limits with their use."""

    name = serializers.CharField()
    paused = serializers.BooleanField()
    pending = serializers.IntegerField()
    waiting = serializers.IntegerField(help_text="Jobs waiting on dependencies.")
    due = serializers.IntegerField()
    running = serializers.IntegerField(
        help_text="Jobs running now, across every dispatcher (what concurrency_limit counts)."
    )
    oldest_due_lag_seconds = serializers.FloatField(
        help_text="Seconds the oldest due pending job has waited (0 when none)."
    )
    slots = serializers.IntegerField(help_text="Worker slots alive dispatchers give this queue.")
    concurrency_limit = serializers.IntegerField(
        allow_null=True, help_text="Most jobs running at once; null: no limit."
    )
    rate_limit = serializers.IntegerField(
        allow_null=True, help_text="Most jobs started per rate_period; null: no limit."
    )
    rate_period = serializers.FloatField(help_text="Seconds of the rate limit's sliding window.")
    rate_used = serializers.IntegerField(
        help_text="Jobs started in the last rate_period seconds (0 without a rate limit)."
    )


class QueueLimitsSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of PATCH /api/queues/{name}/: some of the queue's limits."""

    unknown_key_message = "Cannot be changed: a PATCH may only set concurrency_limit, rate_limit and rate_period."
    openapi_extra = {"minProperties": 1}

    concurrency_limit = RuleField(
        CONCURRENCY_LIMIT, help_text="Most jobs running at once, across every dispatcher; null: no limit."
    )
    rate_limit = RuleField(
        RATE_LIMIT, help_text="Most jobs started per rate_period, across every dispatcher; null: no limit."
    )
    rate_period = RuleField(RATE_PERIOD, allow_null=False, help_text="Seconds of the rate limit's sliding window.")

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give concurrency_limit, rate_limit or rate_period.")
        return attrs


class QueueCountsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    waiting = serializers.IntegerField()
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
