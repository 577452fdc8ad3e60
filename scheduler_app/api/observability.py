"""The API's windows on what ran: a job's log records and the history of rollups.

``GET /api/jobs/{id}/logs/`` is an action of ``views.JobViewSet``; it uses
:func:`job_logs` here. ``GET /api/stats/history/`` is :class:`HistoryView`.
Numbers come from ``scheduler_app.observability.history``.
"""

from django import forms
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import registry
from ..models import Job, JobLog
from ..observability import history
from ..validation.fields import NO_NUL
from ..vocabulary import bounds
from .base import SchedulerAPI
from .fields import TimeField, TimesMixin
from .permissions import needs
from .schema import QUERY_ERRORS, extend_schema

ATTEMPT_MAX = 2**31 - 1


class JobLogSerializer(TimesMixin, serializers.ModelSerializer):
    """One log record an attempt's own thread emitted."""

    level_name = serializers.SerializerMethodField(help_text="DEBUG, INFO, WARNING, ERROR or CRITICAL (or Level N).")

    class Meta:
        model = JobLog
        fields = ["attempt", "seq", "time", "level", "level_name", "logger", "message", "exc_text"]
        read_only_fields = fields

    def get_level_name(self, obj) -> str:
        import logging

        return logging.getLevelName(obj.level)


class PaginatedJobLogSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    count_exact = serializers.BooleanField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = JobLogSerializer(many=True)


class LogQuery(forms.Form):
    attempt = forms.IntegerField(required=False, min_value=1, max_value=ATTEMPT_MAX)


LOG_PARAMETERS = [
    OpenApiParameter(
        "attempt", {"type": "integer", "minimum": 1, "maximum": ATTEMPT_MAX}, description="Only this attempt's records."
    ),
    OpenApiParameter("page", {"type": "integer", "minimum": 1}, description="A page number (1-based)."),
    OpenApiParameter(
        "page_size", {"type": "integer", "minimum": 1, "maximum": 500}, description="Records per page (default 50)."
    ),
]


def query_errors(form):
    """Raise the 400 a bad query string gets: ``{"parameter": ["message"]}``."""
    raise ValidationError({name: list(errors) for name, errors in form.errors.items()})


def job_logs(view, request, job):
    """Return the paginated response of a job's log records, oldest first (``?attempt=`` narrows)."""
    query = LogQuery(request.query_params)
    if not query.is_valid():
        query_errors(query)
    records = JobLog.objects.filter(job=job).order_by("attempt", "seq")
    if query.cleaned_data["attempt"] is not None:
        records = records.filter(attempt=query.cleaned_data["attempt"])
    page = view.paginate_queryset(records)
    return view.get_paginated_response(JobLogSerializer(page, many=True).data)


# -- GET /api/stats/history/ ---------------------------------------------------


class HistoryQuery(forms.Form):
    minutes = forms.IntegerField(required=False, min_value=1, max_value=bounds.HISTORY_MINUTES_MAX)
    queue = forms.CharField(required=False, max_length=bounds.QUEUE_NAME_MAX)
    task = forms.CharField(required=False, max_length=bounds.TASK_NAME_MAX)


class TimingSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class FiguresSerializer(serializers.Serializer):
    enqueued = serializers.IntegerField(help_text="Jobs created (counted by created_at, about 2 minutes late).")
    started = serializers.IntegerField(help_text="Attempts started.")
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Attempts that failed with none left.")
    retried = serializers.IntegerField(help_text="Attempts that failed and will run again.")
    cancelled = serializers.IntegerField()
    wait = TimingSerializer(help_text="Seconds from due time to start.")
    run = TimingSerializer(help_text="Seconds from start to finish.")


class BucketSerializer(FiguresSerializer):
    start = TimeField()
    depth = serializers.IntegerField(help_text="Pending jobs (largest sample in the bucket).")
    due = serializers.IntegerField(help_text="Due pending jobs (largest sample).")
    lag = serializers.FloatField(help_text="Seconds the oldest due job had waited (largest sample).")


class HistorySerializer(serializers.Serializer):
    """The GET /api/stats/history/ document."""

    minutes = serializers.IntegerField()
    bucket_seconds = serializers.IntegerField(help_text="60 up to an hour, 600 up to a day, 3600 beyond.")
    queue = serializers.CharField(allow_null=True)
    task = serializers.CharField(allow_null=True)
    start = TimeField()
    end = TimeField()
    buckets = BucketSerializer(many=True)
    totals = FiguresSerializer()


def _text_parameter(name, max_length, description):
    return OpenApiParameter(
        name, {"type": "string", "maxLength": max_length, "pattern": NO_NUL}, description=description
    )


class HistoryView(SchedulerAPI, APIView):
    required_permissions = {"get": needs("view", Job)}

    @extend_schema(
        summary="Per-minute history: throughput, outcomes, wait and run times, queue depth",
        parameters=[
            OpenApiParameter(
                "minutes",
                {"type": "integer", "minimum": 1, "maximum": bounds.HISTORY_MINUTES_MAX},
                description="How far back (default 60; up to 7 days).",
            ),
            _text_parameter("queue", bounds.QUEUE_NAME_MAX, "Only this queue."),
            _text_parameter(
                "task",
                bounds.TASK_NAME_MAX,
                "Only this task: its path, or its end when one known task has it (as GET /api/jobs/?task=).",
            ),
        ],
        responses={200: HistorySerializer, 400: QUERY_ERRORS},
    )
    def get(self, request):
        query = HistoryQuery(request.query_params)
        if not query.is_valid():
            query_errors(query)
        data = query.cleaned_data
        task = data["task"] or None
        if task:
            paths = registry.paths_named(task)
            if len(paths) > 1:
                raise ValidationError({"task": [registry.ambiguity(task, paths)]})
            task = paths[0] if paths else task
        document = history.series(data["minutes"] or 60, queue=data["queue"] or None, task=task)
        return Response(HistorySerializer(document).data)
