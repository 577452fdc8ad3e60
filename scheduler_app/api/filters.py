"""Query-string filters and ordering of GET /api/jobs/ (django-filter).

Each filter's OpenAPI schema states what it accepts (bounds, lengths, no
NUL), so that a value the schema allows is never a 400. ``JobFilter`` is
the one implementation: the list applies it to the query string,
POST /api/jobs/cancel/ and /retry/ to their "filter" (``matching``).
"""

from datetime import UTC, datetime

import django_filters
from django import forms
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.drainage import set_override
from rest_framework.exceptions import ValidationError

from .. import conf, registry
from ..models import Job, JobStatus
from ..sql.indexes import any_status
from ..sql.search import search_matches, tagged
from ..validation.fields import NO_NUL
from ..validation.labels import TAG
from ..vocabulary.bounds import PRIORITY_MAX, PRIORITY_MIN, QUEUE_NAME_MAX, SEARCH_MAX, TAGS_MAX, TASK_NAME_MAX

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
    """Comma-separated statuses, each one of JobStatus.

    Asked as an OR of statuses (``sql.indexes.any_status``): each is then
    served by the partial index that holds it, where ``IN`` is served by none.
    """

    def filter(self, qs, value):
        if not value:
            return qs
        return qs.filter(any_status(dict.fromkeys(value)))


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


class TagsField(forms.Field):
    """Tags from a repeated parameter (``?tag=a&tag=b``), each checked by ``validation.labels.TAG``."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value):
        values = [v for v in (value or []) if v != ""]
        if len(values) > TAGS_MAX:
            raise forms.ValidationError(f"At most {TAGS_MAX} tags.")
        try:
            return [TAG.check(v) for v in values]
        except DjangoValidationError as exc:
            # django-filter formats every message with ``%`` (params or not): a tag the
            # message quotes ("%s") must not be read as a placeholder.
            raise forms.ValidationError([m.replace("%", "%%") for m in exc.messages]) from None


class TagFilter(django_filters.Filter):
    """Jobs carrying any of the tags given (``sql.search.tagged``: a GIN index on PostgreSQL)."""

    field_class = TagsField

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        schema = {"type": "array", "items": TAG.schema(), "maxItems": TAGS_MAX}
        set_override(self, "field", {**schema, "description": kwargs.get("help_text", "")})

    def filter(self, qs, value):
        return qs.filter(tagged(value, qs.db)) if value else qs


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


def _priority_filter(lookup, bound):
    """Return the filter of a priority bound: ``lookup`` (gte, lte), worded "Priority ``bound`` this"."""
    return IntegerFilter(
        field_name="priority",
        lookup_expr=lookup,
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text=f"Priority {bound} this ({PRIORITY_MIN}..{PRIORITY_MAX}).",
    )


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
        help_text='A task\'s path, or its end when only one known task has it ("echo" for myapp.tasks.echo); '
        "a name several tasks end with is a 400 listing them.",
    )
    priority_min = _priority_filter("gte", "at least")
    priority_max = _priority_filter("lte", "at most")
    execute_after = AwareIsoDateTimeFilter(
        field_name="execute_at", lookup_expr="gte", help_text="execute_at at or after this ISO 8601 time (with offset)."
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
        field_name="schedule_id", min_value=1, max_value=MAX_ID, help_text="Jobs created by this schedule (its id)."
    )
    created_after = AwareIsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", help_text="created_at at or after this time."
    )
    created_before = AwareIsoDateTimeFilter(
        field_name="created_at", lookup_expr="lte", help_text="created_at at or before this time."
    )
    finished_after = AwareIsoDateTimeFilter(
        field_name="finished_at", lookup_expr="gte", help_text="finished_at at or after this time."
    )
    finished_before = AwareIsoDateTimeFilter(
        field_name="finished_at", lookup_expr="lte", help_text="finished_at at or before this time."
    )
    tag = TagFilter(help_text="Jobs carrying this tag; repeat the parameter for any of several.")
    search = TextFilter(
        method="filter_search",
        max_length=SEARCH_MAX,
        help_text="The job id, or text contained in task, unique_key, args, kwargs or meta (any case; "
        "PostgreSQL: a trigram index serves text of 3 characters or more), a tag, or text in a failed job's errors.",
    )
    ordering = TieBreakingOrderingFilter(
        fields=ORDERING_FIELDS,
        help_text="One of id, execute_at, priority, created_at, finished_at; prefix - for descending. Default: -id.",
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
        return search(queryset, value)


def search(queryset, value):
    """Return the jobs of ``queryset`` that the text ``value`` finds: the one rule of ``?search=`` and the admin's box.

    A job id (``42`` or ``#42``), or text in the task, unique_key, args,
    kwargs, meta or errors, or a tag (``sql.search.search_matches``).
    """
    value = value.replace("\x00", "").strip()  # NUL: no database stores it, no job holds it
    number = value.removeprefix("#")
    job_id = int(number) if number.isascii() and number.isdigit() and int(number) <= MAX_ID else None
    return queryset.filter(search_matches(value, queryset.db, hidden=conf.filter_names(), job_id=job_id))


# What a bulk action's "filter" may hold: the list's filters, not its ordering or pages.
FILTER_KEYS = tuple(name for name in JobFilter.base_filters if name != "ordering")
NOT_A_FILTER = 'Must be a JSON object of the job list\'s filters, e.g. {"status": "failed"}; {} for every job.'


def matching(spec, queryset=None):
    """Return the jobs that ``spec`` (the list's query parameters as a JSON object) matches.

    A value is text or a number, or a list of them for a repeated parameter
    (``"tag": ["a", "b"]``). Raise ``ValueError`` with ``{field: [messages]}``
    for a key the list does not filter by, a value of another shape, or a
    value the filter refuses.
    """
    if not isinstance(spec, dict):
        raise ValueError([NOT_A_FILTER])
    data, errors = QueryDict(mutable=True), {}
    shapes = _shapes()
    for key, value in spec.items():
        if key not in FILTER_KEYS:
            errors[key] = [f"Not a filter of the job list; the filters are {', '.join(FILTER_KEYS)}."]
            continue
        kind, wording = shapes[key]
        values = value if kind == "array" and isinstance(value, list) else [value]
        if (
            kind == "array"
            and not isinstance(value, list)
            or not _all_of(values, "string" if kind == "array" else kind)
        ):
            errors[key] = [wording]
        elif not values or "" in values:  # in a query string an empty value is no filter; a body says what it means
            errors[key] = ["May not be empty: leave the key out to not filter by it."]
        elif not all(_is_text(v) for v in values):  # a query string cannot carry these; a JSON body can
            errors[key] = ["Must be valid Unicode text (no lone surrogate)."]
        else:
            data.setlist(key, [str(v) for v in values])
    if not errors:
        filterset = JobFilter(data, queryset=Job.objects.all() if queryset is None else queryset)
        if filterset.is_valid():
            return filterset.qs
        errors = {key: list(messages) for key, messages in filterset.errors.items()}
    raise ValueError(errors)


def _shapes():
    """Return each filter's JSON type in a bulk action's body, with the refusal's wording."""
    words = {"string": "Must be text.", "integer": "Must be a whole number.", "array": "Must be a list of texts."}
    schema = filter_schema()["properties"]
    return {name: (schema[name]["type"], words[schema[name]["type"]]) for name in FILTER_KEYS}


def _is_text(value):
    """Return whether ``value`` (a number, or text) can be stored and compared: no lone surrogate."""
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _all_of(values, kind):
    if kind == "integer":
        return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return all(isinstance(v, str) for v in values)


def filter_schema():
    """Return the JSON schema of a bulk action's "filter": the job list's parameters, one property each."""
    statuses = "|".join(JobStatus.values)
    properties = {}
    for name in FILTER_KEYS:
        known = JobFilter.base_filters[name]
        described = {"description": known.extra.get("help_text", "")}
        if isinstance(known, StatusInFilter):
            schema = {"type": "string", "pattern": f"^({statuses})(,({statuses}))*$", **described}
        elif isinstance(known, AwareIsoDateTimeFilter):
            schema = {"type": "string", "format": "date-time", **described}
        else:
            schema = dict(known._spectacular_annotation["field"])
        if schema["type"] == "string":
            schema["minLength"] = 1
        elif schema["type"] == "array":
            schema["minItems"] = 1
        properties[name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False}
