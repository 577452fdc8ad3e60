"""REST endpoints of recurring schedules: /api/schedules/, /api/schedules/{id}/run/ and /next/.

Thin, like the jobs endpoints: the serializers check the shape of a
request, ``scheduler_app.schedules`` validates (cron expression, time zone,
task) and makes every change. Its ValidationError becomes a 400 with
errors by field in ``scheduler_app.api.exceptions.exception_handler``.
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from .. import conf, schedules
from ..lifecycle.building import QUEUE, TASK
from ..models import Schedule
from ..validation.fields import ARGS, KWARGS, MAX_ATTEMPTS, PRIORITY, TIMEOUT
from ..validation.schedules import (
    CRON,
    EDITABLE,
    ENABLED,
    END_AT,
    INTERVAL,
    MISFIRE_POLICY,
    NAME,
    NEXT_COUNT,
    START_AT,
    TIMEZONE,
)
from ..vocabulary.bounds import NEXT_RUNS_DEFAULT, NEXT_RUNS_MAX
from .base import RowsAPI, audit
from .fields import ArgsField, DirectAttributesMixin, IdentityUrlField, KwargsField, RuleField, StrictKeysMixin
from .filters import MAX_ID
from .permissions import needs
from .schema import DETAIL_ERROR, FIELD_ERRORS, QUERY_ERRORS, extend_schema, extend_schema_view
from .serializers import JobSerializer


class ScheduleSerializer(DirectAttributesMixin, serializers.ModelSerializer):
    """A schedule as the API shows it; exactly one of cron and interval_seconds is set."""

    url = IdentityUrlField(view_name="scheduler_api:schedule-detail")
    args = ArgsField(read_only=True)
    kwargs = KwargsField(read_only=True)
    cron = serializers.SerializerMethodField(help_text="Five-field cron expression, or null.")
    description = serializers.SerializerMethodField(help_text="The timetable in words.")
    last_job_status = serializers.SerializerMethodField(help_text="Status of the last job, or null.")

    class Meta:
        model = Schedule
        fields = [
            "id",
            "url",
            *EDITABLE,
            "description",
            "next_run_at",
            "last_run_at",
            "last_job",
            "last_job_status",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_cron(self, obj) -> str | None:
        return obj.cron or None

    def get_description(self, obj) -> str:
        return schedules.describe(obj)

    def get_last_job_status(self, obj) -> str | None:
        return obj.last_job.status if obj.last_job_id and obj.last_job else None


class ScheduleWriteSerializer(StrictKeysMixin, serializers.Serializer):
    """The body of POST, PUT and PATCH /api/schedules/: the shape; the rules check every value."""

    name = RuleField(NAME, required=True)
    task = RuleField(TASK, required=True, help_text="A registered task (GET /api/tasks/).")
    args = RuleField(ARGS)
    kwargs = RuleField(KWARGS)
    queue = RuleField(QUEUE, help_text="Default: the task's queue.")
    priority = RuleField(PRIORITY, help_text="Default: the task's priority.")
    max_attempts = RuleField(MAX_ATTEMPTS)
    timeout = RuleField(TIMEOUT)
    cron = RuleField(CRON, allow_blank=True, help_text=schedules.CRON_HELP + " Not with interval_seconds.")
    interval_seconds = RuleField(INTERVAL, help_text="Run every this many seconds. Not with cron.")
    timezone = RuleField(TIMEZONE, allow_null=False, help_text="IANA time zone of the cron expression (default UTC).")
    enabled = RuleField(ENABLED, allow_null=False)
    misfire_policy = RuleField(MISFIRE_POLICY, allow_null=False)
    start_at = RuleField(START_AT, text=True)
    end_at = RuleField(END_AT, text=True)

    def changes(self):
        """Return the service's keyword arguments; giving one of cron/interval clears the other."""
        data = dict(self.validated_data)
        if "cron" in data:
            data["cron"] = data["cron"] or ""
            if data["cron"] and "interval_seconds" not in data:
                data["interval_seconds"] = None
        if data.get("interval_seconds") is not None and "cron" not in data:
            data["cron"] = ""
        return data


@extend_schema_view(
    list=extend_schema(summary="List schedules"),
    retrieve=extend_schema(summary="Show one schedule", responses={200: ScheduleSerializer, 404: DETAIL_ERROR}),
)
class ScheduleViewSet(RowsAPI, viewsets.ModelViewSet):
    required_permissions = {
        "list": needs("view", Schedule),
        "retrieve": needs("view", Schedule),
        "create": needs("add", Schedule),
        "update": needs("change", Schedule),
        "partial_update": needs("change", Schedule),
        "destroy": needs("delete", Schedule),
        "run": needs("change", Schedule),
        "next": needs("view", Schedule),
    }
    serializer_class = ScheduleSerializer

    def get_queryset(self):
        return Schedule.objects.select_related("last_job").order_by("name", "id")

    def get_object(self):
        raw = self.kwargs["pk"]
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_ID:
            raise NotFound("No schedule has this id.")
        return get_object_or_404(self.get_queryset(), pk=int(raw))

    def _respond(self, schedule, status_code=status.HTTP_200_OK, headers=None):
        schedule = self.get_queryset().get(pk=schedule.pk)
        return Response(self.get_serializer(schedule).data, status=status_code, headers=headers)

    @extend_schema(
        summary="Create a schedule",
        request=ScheduleWriteSerializer,
        responses={201: ScheduleSerializer, 400: FIELD_ERRORS},
    )
    def create(self, request):
        body = ScheduleWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            schedule = schedules.create(**body.changes())
            audit(request, "create", "schedule", object_id=schedule.pk, detail=body.changes())
        response = self._respond(schedule, status.HTTP_201_CREATED)
        response["Location"] = str(response.data["url"])
        return response

    @extend_schema(
        summary="Replace a schedule",
        request=ScheduleWriteSerializer,
        responses={200: ScheduleSerializer, 400: FIELD_ERRORS, 404: DETAIL_ERROR},
    )
    def update(self, request, pk=None, partial=False):
        schedule = self.get_object()
        body = ScheduleWriteSerializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        changes = body.changes()
        if "kwargs" in changes:  # what it read back: [FILTERED] keeps the real value
            changes["kwargs"] = conf.unfiltered(changes["kwargs"], schedule.kwargs)
        try:
            with transaction.atomic():
                schedule = schedules.update(schedule.pk, **changes)
                audit(request, "edit", "schedule", object_id=schedule.pk, detail=changes)
        except Schedule.DoesNotExist:
            raise NotFound("No schedule has this id.") from None
        return self._respond(schedule)

    @extend_schema(
        summary="Change some fields of a schedule",
        request=ScheduleWriteSerializer,
        responses={200: ScheduleSerializer, 400: FIELD_ERRORS, 404: DETAIL_ERROR},
    )
    def partial_update(self, request, pk=None):
        return self.update(request, pk, partial=True)

    @extend_schema(summary="Delete a schedule (its jobs stay)", responses={204: None, 404: DETAIL_ERROR})
    def destroy(self, request, pk=None):
        schedule = self.get_object()
        try:
            with transaction.atomic():
                schedules.delete(schedule.pk)
                audit(request, "delete", "schedule", object_id=schedule.pk, detail={"name": schedule.name})
        except Schedule.DoesNotExist:
            raise NotFound("No schedule has this id.") from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="The schedule's coming run times (UTC), soonest first",
        parameters=[
            OpenApiParameter(
                "count",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                description=f"How many (1 to {NEXT_RUNS_MAX}; default {NEXT_RUNS_DEFAULT}).",
            )
        ],
        responses={
            200: OpenApiResponse(
                {"type": "array", "items": {"type": "string", "format": "date-time"}},
                description="ISO 8601 times in UTC; fewer than count where the schedule ends, [] when it is disabled.",
            ),
            400: QUERY_ERRORS,
            404: DETAIL_ERROR,
        },
    )
    @action(detail=True, methods=["get"])
    def next(self, request, pk=None):
        schedule = self.get_object()
        try:
            count = NEXT_COUNT.parse(request.query_params.get("count") or str(NEXT_RUNS_DEFAULT))
        except DjangoValidationError as exc:
            raise ValidationError({"count": exc.messages}) from None
        runs = schedules.coming_runs(schedule, count, timezone.now())
        return Response([run.isoformat().replace("+00:00", "Z") for run in runs])

    @extend_schema(
        summary="Run a schedule now: enqueue one job at once (the timetable is unchanged)",
        request=None,
        responses={
            201: OpenApiResponse(JobSerializer, description="The job created."),
            400: OpenApiResponse(
                FIELD_ERRORS.response, description="The schedule's task or queue is no longer served: errors by field."
            ),
            404: DETAIL_ERROR,
        },
    )
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        schedule = self.get_object()
        with transaction.atomic():
            job = schedules.run_now(schedule.pk, created_by=request.user)
            audit(request, "run_now", "schedule", object_id=schedule.pk, detail={"job": job.pk})
        data = JobSerializer(job, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED, headers={"Location": str(data["url"])})
