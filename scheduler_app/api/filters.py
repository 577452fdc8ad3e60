"""Query-string filters and ordering of GET /api/jobs/ (django-filter).

Each filter's OpenAPI schema states what it accepts (bounds, lengths, no
NUL), so that a value the schema allows is never a 400.
"""

from datetime import UTC, datetime

import django_filters
from django import forms
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.drainage import set_override
from rest_framework.exceptions import ValidationError

from .. import registry
from ..models import Job, JobStatus
from ..validation.fields import NO_NUL
from ..vocabulary.bounds import PRIORITY_MAX, PRIORITY_MIN, QUEUE_NAME_MAX, SEARCH_MAX, TASK_NAME_MAX

# Largest value of a 64-bit primary key: a longer number cannot be an id.
MAX_ID = 2**63 - 1

ORDERING_FIELDS = ("id", "execute_at", "priority", "created_at", "finished_at")


class AwareIsoDateTimeField(forms.Field):
    """An ISO 8601 date and time that must carry a UTC offset (or Z)."""

    default_error_messages = {
        "invalid": "Enter an ISO 8601 date and time with an offset, e.g. 2026-01-01T09:00:00+00:00.",
        "naive": "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00).",
    }

    def to_python(self, value):
        if value in self.empty_values:
            return None
        value = value.strip()
        try:
            # parse_datetime accepts a bare date too; a time is required here.
            parsed = parse_datetime(value) if "T" in value.upper() or " " in value else None
        except ValueError:
            parsed = None
        if parsed is None:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        if timezone.is_naive(parsed):
            raise forms.ValidationError(self.error_messages["naive"], code="naive")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            # The database compares in UTC; an offset that pushes the value
            # past year 1 or 9999 cannot be written there. As a bound it
            # means "before (after) every representable time".
            edge = datetime.max if parsed.year == datetime.max.year else datetime.min
            return edge.replace(tzinfo=UTC)


class AwareIsoDateTimeFilter(django_filters.DateTimeFilter):
    field_class = AwareIsoDateTimeField


class StatusInFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    """Comma-separated statuses, each one of JobStatus."""


class IntegerFilter(django_filters.NumberFilter):
    """A whole number from ``min_value`` to ``max_value``; the schema says so."""

    field_class = forms.IntegerField

    def __init__(self, *args, min_value, max_value, **kwargs):
        super().__init__(*args, min_value=min_value, max_value=max_value, **kwargs)
        schema = {"type": "integer", "minimum": min_value, "maximum": max_value}
        set_override(self, "field", {**schema, "description": kwargs.get("help_text", "")})


class TextFilter(django_filters.CharFilter):
    """Text of at most ``max_length`` characters without NUL (Django's form field refuses it); the schema says so."""

    def __init__(self, *args, max_length, **kwargs):
        super().__init__(*args, max_length=max_length, **kwargs)
        schema = {"type": "string", "maxLength": max_length, "pattern": NO_NUL}
        set_override(self, "field", {**schema, "description": kwargs.get("help_text", "")})


class TieBreakingOrderingFilter(django_filters.OrderingFilter):
    """OrderingFilter that ends every ordering with id, for stable pages."""

    def filter(self, qs, value):
        # The CSV field lets empty items through ("id," or ","); skip them.
        ordering = [self.get_ordering_value(param) for param in value or () if param]
        if not ordering:
            return qs
        if not {"id", "-id"} & set(ordering):
            ordering.append("-id" if ordering[-1].startswith("-") else "id")
        return qs.order_by(*ordering)


class JobFilter(django_filters.FilterSet):
    status = StatusInFilter(
        field_name="status",
        choices=JobStatus.choices,
        help_text="Comma-separated statuses, e.g. pending,running (waiting: on dependencies).",
    )
    queue = TextFilter(field_name="queue", max_length=QUEUE_NAME_MAX, help_text="Exact queue name.")
    task = TextFilter(
        method="filter_task",
        max_length=TASK_NAME_MAX,
        help_text="A task's path, or its end when only one known task has it (\"echo\" for myapp.tasks.echo); "
        "a name several tasks end with is a 400 listing them.",
    )
    priority_min = IntegerFilter(
        field_name="priority",
        lookup_expr="gte",
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text=f"Priority at least this ({PRIORITY_MIN}..{PRIORITY_MAX}).",
    )
    priority_max = IntegerFilter(
        field_name="priority",
        lookup_expr="lte",
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text=f"Priority at most this ({PRIORITY_MIN}..{PRIORITY_MAX}).",
    )
    execute_after = AwareIsoDateTimeFilter(
        field_name="execute_at",
        lookup_expr="gte",
        help_text="execute_at at or after this ISO 8601 time (with offset).",
    )
    execute_before = AwareIsoDateTimeFilter(
        field_name="execute_at",
        lookup_expr="lte",
        help_text="execute_at at or before this ISO 8601 time (with offset).",
    )
    depends_on = IntegerFilter(
        field_name="depends_on",
        min_value=1,
        max_value=MAX_ID,
        help_text="Jobs that depend on this job (its id): its dependents.",
    )
    schedule = IntegerFilter(
        field_name="schedule_id",
        min_value=1,
        max_value=MAX_ID,
        help_text="Jobs created by this schedule (its id).",
    )
    search = TextFilter(
        method="filter_search",
        max_length=SEARCH_MAX,
        help_text="The job id, or text contained in task or unique_key.",
    )
    ordering = TieBreakingOrderingFilter(
        fields=ORDERING_FIELDS,
        help_text="One of id, execute_at, priority, created_at, finished_at; "
        "prefix - for descending. Default: -id.",
    )

    class Meta:
        model = Job
        fields = []

    def filter_task(self, queryset, name, value):
        paths = registry.paths_named(value)
        if len(paths) > 1:
            raise ValidationError({"task": [registry.ambiguity(value, paths)]})
        return queryset.filter(task=paths[0] if paths else value)

    def filter_search(self, queryset, name, value):
        match = Q(task__icontains=value) | Q(unique_key__icontains=value)
        if value.isascii() and value.isdigit() and int(value) <= MAX_ID:
            match |= Q(pk=int(value))
        return queryset.filter(match)
