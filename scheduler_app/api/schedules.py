"""REST endpoints of recurring schedules: /api/schedules/ and /api/schedules/{id}/run/.

Thin, like the jobs endpoints: the serializers check the shape of a
request, ``scheduler_app.schedules`` validates (cron expression, time zone,
task) and makes every change. Its ValidationError becomes a 400 with
errors by field in ``scheduler_app.api.exceptions.exception_handler``.
"""

import logging

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from scheduler_app import limits, schedules
from scheduler_app.models import PRIORITY_MAX, PRIORITY_MIN, MisfirePolicy, Schedule

from .filters import MAX_ID
from .pagination import EstimatedCountPagination
from .serializers import (
    MAX_TIMEOUT_SECONDS,
    AwareDateTimeField,
    JobSerializer,
    JSONListField,
    JSONObjectField,
    StrictKeysMixin,
)
from .views import DETAIL_ERROR, FIELD_ERRORS, StaffOnly

logger = logging.getLogger(__name__)


class ScheduleSerializer(serializers.ModelSerializer):
    """A schedule as the API shows it; exactly one of cron and interval_seconds is set."""

    url = serializers.HyperlinkedIdentityField(view_name="api:schedule-detail")
    args = JSONListField(read_only=True)
    kwargs = JSONObjectField(read_only=True)
    cron = serializers.SerializerMethodField(help_text="Five-field cron expression, or null.")
    description = serializers.SerializerMethodField(help_text="The timetable in words.")
    last_job_status = serializers.SerializerMethodField(help_text="Status of the last job, or null.")

    class Meta:
        model = Schedule
        fields = [
            "id",
            "url",
            "name",
            "task",
            "args",
            "kwargs",
            "queue",
            "priority",
            "max_attempts",
            "timeout",
            "cron",
            "interval_seconds",
            "timezone",
            "description",
            "enabled",
            "misfire_policy",
            "start_at",
            "end_at",
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
    """The body of POST, PUT and PATCH /api/schedules/: the shape; the service checks the rest."""

    name = serializers.CharField(max_length=schedules.NAME_MAX)
    task = serializers.CharField(max_length=255, help_text="A registered task (GET /api/tasks/).")
    args = JSONListField(required=False)
    kwargs = JSONObjectField(required=False)
    queue = serializers.CharField(required=False, allow_null=True, max_length=64)
    priority = serializers.IntegerField(
        required=False, allow_null=True, min_value=PRIORITY_MIN, max_value=PRIORITY_MAX
    )
    max_attempts = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=limits.MAX_ATTEMPTS_MAX
    )
    timeout = serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=MAX_TIMEOUT_SECONDS
    )
    cron = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=200, trim_whitespace=True,
        help_text=schedules.CRON_HELP + " Not with interval_seconds.",
    )
    interval_seconds = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=schedules.INTERVAL_MAX,
        help_text="Run every this many seconds. Not with cron.",
    )
    timezone = serializers.CharField(
        required=False, max_length=64, help_text="IANA time zone of the cron expression (default UTC)."
    )
    enabled = serializers.BooleanField(required=False)
    misfire_policy = serializers.ChoiceField(choices=MisfirePolicy.choices, required=False)
    start_at = AwareDateTimeField(required=False, allow_null=True)
    end_at = AwareDateTimeField(required=False, allow_null=True)

    def validate_timeout(self, value):
        if value is not None and value <= 0:
            raise serializers.ValidationError("Must be greater than 0.")
        return value

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
class ScheduleViewSet(StaffOnly, viewsets.ModelViewSet):
    serializer_class = ScheduleSerializer
    pagination_class = EstimatedCountPagination
    filter_backends = []

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
        schedule = schedules.create(**body.changes())
        logger.info(
            "schedule %s created through the API by %s", schedule.pk, request.user,
            extra={"schedule_id": schedule.pk, "action": "schedule_create"},
        )
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
        try:
            schedule = schedules.update(schedule.pk, **body.changes())
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
            schedules.delete(schedule.pk)
        except Schedule.DoesNotExist:
            raise NotFound("No schedule has this id.") from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Run a schedule now: enqueue one job at once (the timetable is unchanged)",
        request=None,
        responses={201: OpenApiResponse(JobSerializer, description="The job created."), 404: DETAIL_ERROR},
    )
    @action(detail=True, methods=["post"])
    def run(self, request, pk=None):
        schedule = self.get_object()
        job = schedules.run_now(schedule.pk, created_by=request.user)
        logger.info(
            "schedule %s run now through the API by %s: job %s", schedule.pk, request.user, job.pk,
            extra={"schedule_id": schedule.pk, "job_id": job.pk, "action": "schedule_run"},
        )
        data = JobSerializer(job, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED, headers={"Location": str(data["url"])})
