"""Serializers of the REST API: how jobs, tasks, workers and queues look on the wire.

Write serializers check only the shape of a request (which keys are
allowed); every value goes to the lifecycle's rules through ``RuleField``,
so the API refuses exactly what the admin, the commands and
``task.enqueue()`` refuse, with the same messages.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..lifecycle.building import QUEUE, TASK
from ..models import Job, JobStatus
from ..observability import lateness, stats
from ..validation.admission import CONCURRENCY_KEY, EXPIRES_AT, EXPIRES_IN, JOB_CONCURRENCY_LIMIT
from ..validation.fields import (
    ARGS,
    DELAY,
    DEPENDS_ON,
    DEPENDS_ON_INDEX,
    EXECUTE_AT,
    KWARGS,
    MAX_ATTEMPTS,
    ON_DEPENDENCY_FAILURE,
    PRIORITY,
    TIMEOUT,
    UNIQUE_FOR,
    UNIQUE_KEY,
)
from ..validation.jobs import BOTH_WHEN
from ..validation.labels import META, TAGS
from ..validation.workflows import PASS_RESULTS
from ..vocabulary import bounds
from . import previews
from .fields import (
    ArgsField,
    DirectAttributesMixin,
    IdentityUrlField,
    JSONObjectField,
    KwargsField,
    PresentKeysMixin,
    ProgressField,
    RuleField,
    StrictKeysMixin,
)


class JobLinkSerializer(serializers.Serializer):
    """Another job, as a job's dependencies and dependents name it."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=JobStatus.choices)


class JobListSerializer(serializers.ListSerializer):
    """Jobs, with the dependencies and dependents of all of them read at once (at most two queries)."""

    def to_representation(self, data):
        jobs = list(data.all() if hasattr(data, "all") else data)
        self.context["links"] = stats.job_links(jobs)
        self.context["held"] = lateness.held_by_key(jobs)
        self.context["late"] = lateness.late_reasons(jobs)  # no query when none is late
        return super().to_representation(jobs)


def _links(field, job, direction):
    links = field.context.get("links")
    if links is None or job.pk not in links:
        links = field.context["links"] = {**(links or {}), **stats.job_links([job])}
    return [{"id": other, "status": status} for other, status in links[job.pk][direction]]


class JobSerializer(DirectAttributesMixin, serializers.ModelSerializer):
    """A job as the API shows it."""

    url = IdentityUrlField(view_name="scheduler_api:job-detail")
    created_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Username of who created the job; null when created by code.",
    )
    args = ArgsField(read_only=True)
    kwargs = KwargsField(read_only=True)
    progress = ProgressField()
    tags = serializers.SerializerMethodField(help_text="The job's tags (GET /api/jobs/?tag= finds them).")
    meta = JSONObjectField(read_only=True, help_text="The job's meta: a JSON object set at creation.")
    depends_on = serializers.SerializerMethodField(help_text="The jobs this one runs after, with their statuses.")
    dependents = serializers.SerializerMethodField(
        help_text=f"The jobs that run after this one (at most {bounds.DEPENDENTS_SHOWN}; GET /api/jobs/?depends_on=ID lists them all)."
    )
    held_by = serializers.SerializerMethodField(
        help_text='"concurrency_key" while the job is pending and due but held back because concurrency_limit '
        "jobs with its concurrency_key run; null otherwise."
    )
    late_reason = serializers.SerializerMethodField(
        help_text="Why a pending job past its execute_at has not started: its queue is paused, no live dispatcher "
        "serves the queue, the queue is at its concurrency limit or its rate limit, or no dispatcher serving it "
        "has a free slot; null when the job is not late (or is about to start)."
    )
    truncated = serializers.SerializerMethodField(
        help_text=f"Which of args, kwargs and result GET /api/jobs/ cut: each is then a string, the first "
        f"{bounds.LIST_VALUE_BYTES} bytes of its JSON text (GET /api/jobs/{{id}}/ shows them whole). "
        "Always [] elsewhere."
    )

    class Meta:
        model = Job
        list_serializer_class = JobListSerializer
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
            "tags",
            "meta",
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
            "snoozes",
            "on_dependency_failure",
            "dependencies_left",
            "depends_on",
            "dependents",
            "concurrency_key",
            "concurrency_limit",
            "expires_at",
            "held_by",
            "late_reason",
            "truncated",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "array", "items": TAGS.tag.schema()})
    def get_tags(self, job):
        # A row written around the service may hold anything: what is not a tag's text is left out.
        return [tag for tag in job.tags if isinstance(tag, str)] if isinstance(job.tags, list) else []

    @extend_schema_field(JobLinkSerializer(many=True))
    def get_depends_on(self, job):
        return _links(self, job, "depends_on")

    @extend_schema_field(JobLinkSerializer(many=True))
    def get_dependents(self, job):
        return _links(self, job, "dependents")

    @extend_schema_field({"type": "string", "enum": ["concurrency_key"], "nullable": True})
    def get_held_by(self, job):
        held = self.context.get("held")
        if held is None:
            held = lateness.held_by_key([job])
        return "concurrency_key" if job.pk in held else None

    @extend_schema_field({"type": "string", "enum": [*lateness.REASONS, None], "nullable": True})
    def get_late_reason(self, job):
        late = self.context.get("late")
        if late is not None and job.pk in late:
            return late[job.pk]
        return lateness.late_reason(job)

    @extend_schema_field({"type": "array", "items": {"type": "string", "enum": list(previews.BOUNDED)}})
    def get_truncated(self, job):
        return getattr(job, "truncated", [])


def _cut(kind):
    what = f"The value ({kind}), or" if kind else "The value, or"
    return f"{what} a string when truncated names it: the first {bounds.LIST_VALUE_BYTES} bytes of its JSON text."


@extend_schema_field({"oneOf": [{"type": "array", "items": {}}, {"type": "string"}], "description": _cut("a list")})
class ListedArgsField(ArgsField):
    """args in the job list: the list, or the head of its JSON text."""


@extend_schema_field(
    {"oneOf": [{"type": "object", "additionalProperties": {}}, {"type": "string"}], "description": _cut("an object")}
)
class ListedKwargsField(KwargsField):
    """kwargs in the job list: the object, or the head of its JSON text."""


class JobListEntrySerializer(JobSerializer):
    """A job as GET /api/jobs/ lists it: args, kwargs and result bounded (``previews``)."""

    args = ListedArgsField(read_only=True)
    kwargs = ListedKwargsField(read_only=True)
    result = serializers.JSONField(read_only=True, allow_null=True, help_text=_cut(""))


@extend_schema_field({"type": "boolean", "enum": [True]})
class AlwaysTrueField(serializers.BooleanField):
    """A flag that is only ever true."""


class DuplicateSerializer(serializers.Serializer):
    """The job that holds a unique key, for a caller who may not view jobs: its id only."""

    id = serializers.IntegerField(help_text="The job that holds the unique key.")
    duplicate = AlwaysTrueField(help_text="Always true: nothing was created.")


class JobCreateSerializer(StrictKeysMixin, PresentKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/ (and of each item of a bulk request)."""

    task = RuleField(TASK, required=True, help_text="A registered task (GET /api/tasks/ lists them).")
    args = RuleField(ARGS, help_text="Positional arguments (default []).")
    kwargs = RuleField(KWARGS, help_text="Keyword arguments (default {}).")
    execute_at = RuleField(
        EXECUTE_AT, text=True, help_text="When to run, ISO 8601 with an offset. Not with delay. Default: now."
    )
    delay = RuleField(
        DELAY,
        help_text='Run this many seconds from now (a number, or text such as "90s", "2h", "1h30m"). Not with execute_at.',
    )
    priority = RuleField(PRIORITY, help_text="Higher runs first. Default: the task's.")
    queue = RuleField(QUEUE, help_text="A queue the backend serves. Default: the task's.")
    max_attempts = RuleField(MAX_ATTEMPTS, help_text="Attempts before the job fails for good. Default: the setting's.")
    timeout = RuleField(
        TIMEOUT, help_text='Seconds an attempt may run (a number, or text such as "30m"). Default: no limit.'
    )
    unique_key = RuleField(
        UNIQUE_KEY,
        help_text="At most one pending, waiting or running job per key; a match returns that job "
        "(its id only, without view_job).",
    )
    unique_for = RuleField(
        UNIQUE_FOR,
        help_text='Seconds (or text such as "1d") the unique key stays taken, whatever becomes of the job unless it is cancelled (the key '
        "defaults to the task and its arguments); a match within them returns that job. At most the task's "
        "@options(unique_for).",
    )
    depends_on = RuleField(DEPENDS_ON, help_text="Ids of jobs that must succeed before this one runs.")
    tags = RuleField(TAGS, help_text=f"{TAGS.message} Default: the task's @options(tags).")
    meta = RuleField(META, help_text=f"{META.message} Kept with the job; ?search= finds text in it. Default {{}}.")
    on_dependency_failure = RuleField(
        ON_DEPENDENCY_FAILURE,
        help_text='When a dependency fails or is cancelled: "cancel" this job too (default), or "run" it anyway.',
    )
    pass_results = RuleField(
        PASS_RESULTS,
        help_text="Receive the dependencies' results as the first argument (one: itself; several: a list).",
    )

    concurrency_key = RuleField(
        CONCURRENCY_KEY, help_text="At most concurrency_limit jobs with this key run at once, across every dispatcher."
    )
    concurrency_limit = RuleField(
        JOB_CONCURRENCY_LIMIT, help_text="How many jobs with the key may run at once (default 1)."
    )
    expires_in = RuleField(
        EXPIRES_IN,
        help_text='Seconds (or a duration such as "2h") after which the job never starts. Not with expires_at.',
    )
    expires_at = RuleField(
        EXPIRES_AT, text=True, help_text="When the job expires if not started by then. Not with expires_in."
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


class BulkJobSerializer(JobCreateSerializer):
    """One job of POST /api/jobs/bulk/: a job body, which may name other jobs of the request it depends on."""

    depends_on_index = RuleField(
        DEPENDS_ON_INDEX, help_text="Indexes (0-based) of jobs of this request that must succeed before this one runs."
    )


class BulkCreateSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/bulk/."""

    jobs = BoundedListField(
        child=BulkJobSerializer(),
        allow_empty=False,
        min_length=1,  # as allow_empty says, for the schema
        max_length=bounds.BULK_MAX,
        help_text=f"1 to {bounds.BULK_MAX} job bodies, as for POST /api/jobs/.",
    )

    def enqueue_specs(self):
        """Return one lifecycle spec per job, in request order."""
        return [JobCreateSerializer.enqueue_spec(data) for data in self.validated_data["jobs"]]


class JobFilterField(serializers.JSONField):
    """A bulk action's filter; ``api.filters.matching`` checks it (the schema: ``filters.filter_schema``)."""

    @property
    def _spectacular_annotation(self):
        from .filters import filter_schema

        return {"field": {**filter_schema(), "description": self.help_text}}


class BulkActionSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/cancel/ and /retry/: {"filter": {...}}; {} is every job, and must be said."""

    filter = JobFilterField(
        required=True,
        help_text='The job list\'s query parameters as an object, e.g. {"status": "failed", "tag": ["a", "b"]}; '
        "a list repeats a parameter. {} matches every job (the key itself is required).",
    )


RUN_NOW_HELP = (
    "true: due now, whatever its time. false (the default): a job whose execute_at is still ahead "
    "(cancelled before its time) keeps it; the others are due now."
)


class JSONBoolean(serializers.BooleanField):
    """true or false, nothing else (DRF's BooleanField also takes 0, 1, "yes", "on")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class RetrySerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST /api/jobs/{id}/retry/, optional: {"now": true} runs it now even if its time is ahead."""

    now = JSONBoolean(required=False, default=False, help_text=RUN_NOW_HELP)


class BulkRetrySerializer(BulkActionSerializer):
    """The body of POST /api/jobs/retry/: {"filter": {...}, "now": false}."""

    now = JSONBoolean(required=False, default=False, help_text=RUN_NOW_HELP)


class RescheduleSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of PATCH /api/jobs/{id}/: when (execute_at, or delay from now) and priority."""

    unknown_key_message = (
        "Cannot be changed: a PATCH may only set execute_at (or delay: a duration from now) and priority; "
        "a job's other fields are fixed once it is made (cancel it and enqueue another)."
    )
    openapi_extra = {"minProperties": 1}

    execute_at = RuleField(EXECUTE_AT, text=True, allow_null=False)
    delay = RuleField(
        DELAY, allow_null=False, help_text="Run this long from now: seconds, or text such as 5m or 1h30m."
    )
    priority = RuleField(PRIORITY, allow_null=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give execute_at or delay, priority, or both.")
        if "execute_at" in attrs and "delay" in attrs:
            raise serializers.ValidationError({"delay": [BOTH_WHEN]})
        return attrs
