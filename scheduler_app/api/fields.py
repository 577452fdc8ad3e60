"""Serializer fields that hand their value to the service's rules instead of restating them.

A ``RuleField`` accepts what the JSON body holds, asks one rule of
``scheduler_app.lifecycle.validation`` (or a schedule rule) whether it is
valid, and turns the rule's ``ValidationError`` into DRF's: the message is
the rule's own, the same the admin, the commands and ``task.enqueue()``
show. The OpenAPI schema of the field is the rule's ``schema()``.
"""

import copy
from collections.abc import Mapping
from datetime import UTC, datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import ISO_8601, serializers
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings
from rest_framework.utils import html

from ..validation import progress
from ..validation.fields import Duration


def rule_messages(exc):
    """Return the messages of a rule's ValidationError (one field's)."""
    if hasattr(exc, "error_dict"):
        return [m for messages in exc.message_dict.values() for m in messages]
    return list(exc.messages)


class RuleField(serializers.Field):
    """A value checked by ``rule``; ``text=True``: a JSON string the rule parses (a date and time)."""

    def __init__(self, rule, *, text=False, allow_blank=False, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", not kwargs["required"])
        super().__init__(**kwargs)
        self.rule = rule
        self.text = text
        self.allow_blank = allow_blank  # "" means "none" (a schedule's cron)

    @property
    def _spectacular_annotation(self):
        """The field's OpenAPI schema (drf-spectacular's override), the rule's, made when the schema is.

        Made on access, so enums of tasks and queues are current, and a
        request that only validates does not list every task and queue.
        """
        schema = self.rule.schema()
        if self.allow_null:
            schema["nullable"] = True
        return {"field": schema}

    def to_internal_value(self, data):
        if self.allow_blank and data == "":
            return data
        try:
            if self.text:
                if not isinstance(data, str):
                    self.rule.fail()
                return self.rule.parse(data)
            checked = self.rule.check(data)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(rule_messages(exc)) from None
        # A duration's text ("2h") is stored as its seconds; other values go on as given.
        return checked if isinstance(self.rule, Duration) else data

    def to_representation(self, value):
        return value


class TimeField(serializers.DateTimeField):
    """DRF's DateTimeField, except that a time the active zone has no date for is shown in UTC.

    Rows written around the service can hold the first or last instant
    Python knows (``readable``): 9999-12-31T23:59:59Z is in year 10000 in
    Asia/Tokyo, and DRF's conversion raised OverflowError (a 500).
    """

    def enforce_timezone(self, value):
        try:
            return super().enforce_timezone(value)
        except OverflowError:
            return value.astimezone(UTC)


class TimesMixin:
    """For a ModelSerializer: the model's DateTimeFields become ``TimeField``s."""

    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping, models.DateTimeField: TimeField}


class DirectAttributesMixin(TimesMixin):
    """A ModelSerializer that reads its plain model fields straight off the instance.

    DRF's ``to_representation`` walks each field's ``source`` through
    ``get_attribute`` (callables, dotted paths, dict keys, related objects):
    three quarters of the time of a 1,000-job response. A field whose source
    is a concrete, non-relational column of the model and which is not a
    related or method field gets ``getattr(instance, name)`` instead; every
    other field (links, related objects, method fields) takes DRF's way.
    The output is the same dict (``tests/api/test_representation.py``).
    """

    def get_fields(self):
        """The fields ModelSerializer builds from the model, built once per class and copied per instance.

        Building them (the model field mapping, per field) took ~2 ms of
        every response; a copy is what DRF makes of declared fields anyway.
        """
        template = type(self).__dict__.get("_fields_template")
        if template is None:
            template = super().get_fields()
            type(self)._fields_template = template
        fields = copy.deepcopy(template)
        for field in fields.values():
            if isinstance(field, serializers.DateTimeField) and not hasattr(field, "timezone"):
                # What DRF asks per value (the active time zone, from a
                # context-local), asked once: a serializer lives for one
                # request, and three datetimes per job asked it 3,000
                # times in a 1,000-job response.
                field.timezone = field.default_timezone()
        return fields

    def to_representation(self, instance):
        out = {}
        for name, field, kind, extra in self._representation_plan():
            if kind is _RELATED and getattr(instance, extra) is None:
                out[name] = None
                continue
            if kind is _DRF or kind is _RELATED:
                try:
                    value = field.get_attribute(instance)
                except serializers.SkipField:
                    continue
                check = value.pk if isinstance(value, PKOnlyObject) else value
                out[name] = None if check is None else field.to_representation(value)
                continue
            value = getattr(instance, extra if kind is _KEY else name)
            if value is None or kind is _KEY or kind is _SAME and type(value) in extra:
                out[name] = value
            elif kind is _DATETIME and type(value) is datetime and value.tzinfo is not None:
                if value is not extra[1]:  # the jobs of one bulk request share their datetimes
                    try:
                        text = value.astimezone(extra[0]).isoformat()
                    except OverflowError:  # no such date in that zone (see TimeField)
                        text = value.astimezone(UTC).isoformat()
                    extra[1], extra[2] = value, text[:-6] + "Z" if text.endswith("+00:00") else text
                out[name] = extra[2]
            else:
                out[name] = field.to_representation(value)
        return out

    def _representation_plan(self):
        """``[(name, field, kind, extra)]``: how each readable field is read and written.

        ``_SAME``: a column whose DRF field returns a value of the types
        ``extra`` unchanged (``int(7)``, ``str("x")``, a JSON value), so it
        is not called for them. ``_DATETIME``: DRF's ISO 8601 text in the
        serializer's time zone (``extra``: it, and the last value written and
        its text, which the next job of a bulk request often shares). ``_KEY``: a primary-key
        related field, the foreign key's column ``extra`` itself (DRF wraps
        and unwraps it). ``_RELATED``: a related field that is null when the
        column ``extra`` is (no object to fetch), DRF's way otherwise.
        ``_DIRECT``: the column read, DRF's ``to_representation``. ``_DRF``:
        DRF's way throughout (links, method fields, dotted sources).
        """
        plan = self.__dict__.get("_plan")
        if plan is None:
            model = self.Meta.model
            columns = {f.name: f for f in model._meta.concrete_fields}
            plan = self.__dict__["_plan"] = [
                (field.field_name, field, *_reading(field, columns)) for field in self._readable_fields
            ]
        return plan


_DRF, _DIRECT, _SAME, _DATETIME, _KEY, _RELATED = "drf", "direct", "same", "datetime", "key", "related"

# DRF fields whose to_representation returns a value of these exact types as it is.
_UNCHANGED = {
    serializers.IntegerField: (int,),
    serializers.CharField: (str,),
    serializers.BooleanField: (bool,),
    serializers.FloatField: (float,),
}


def _reading(field, columns):
    """Return ``(kind, extra)`` of ``DirectAttributesMixin._representation_plan`` for one field."""
    column = columns.get(field.source) if field.source_attrs == [field.field_name] else None
    if column is None or isinstance(field, serializers.SerializerMethodField):
        return _DRF, None
    if column.is_relation:
        if not column.many_to_one:
            return _DRF, None
        if type(field) is serializers.PrimaryKeyRelatedField and field.pk_field is None:
            return _KEY, column.attname
        if isinstance(field, serializers.RelatedField) and not field.use_pk_only_optimization():
            return _RELATED, column.attname
        return _DRF, None
    if isinstance(field, serializers.RelatedField):
        return _DRF, None
    kind = type(field)
    if kind in _UNCHANGED:
        return _SAME, _UNCHANGED[kind]
    if kind is serializers.JSONField and not field.binary:
        return _SAME, (dict, list, str, int, float, bool)
    if kind is serializers.ChoiceField and all(type(key) is str for key in field.choices):
        return _SAME, (str,)  # a choice's text maps to itself; other text is returned as it is
    if (
        kind in (serializers.DateTimeField, TimeField)
        and getattr(field, "timezone", None) is not None
        and str(getattr(field, "format", api_settings.DATETIME_FORMAT)).lower() == ISO_8601
    ):
        return _DATETIME, [field.timezone, None, None]  # the time zone, the last value written and its text
    return _DIRECT, None


class IdentityUrlField(serializers.HyperlinkedIdentityField):
    """A HyperlinkedIdentityField that resolves the URL once per request, not once per object.

    The URL of an object with an integer key is the URL of a marker key with
    the marker replaced by the object's key: one ``reverse()`` and one
    ``build_absolute_uri()`` per response instead of one per row (a fifth
    of a 1,000-job response). Other keys take DRF's way.
    """

    MARK = 918_273_645_546_372_819

    def get_url(self, obj, view_name, request, format):
        key = getattr(obj, self.lookup_field, None)
        if type(key) is not int or key < 0 or self.lookup_url_kwarg != self.lookup_field:
            return super().get_url(obj, view_name, request, format)
        cache = self.__dict__.setdefault("_templates", {})
        template = cache.get((id(request), view_name, format))
        if template is None:
            marked = self.reverse(view_name, kwargs={self.lookup_url_kwarg: self.MARK}, request=request, format=format)
            template = marked.split(str(self.MARK))
            if len(template) != 2:
                return super().get_url(obj, view_name, request, format)
            cache.clear()  # one request at a time per serializer instance
            cache[(id(request), view_name, format)] = template
        return f"{template[0]}{key}{template[1]}"


class PresentKeysMixin:
    """A Serializer whose ``to_internal_value`` visits the fields a body has, not every declared one.

    DRF asks every writable field for its value, and an absent field
    without a default raises SkipField: work for nothing in a bulk request
    of 1,000 bodies that each give two of fifteen fields. Here an absent
    field runs DRF's validation only when it is required or has a default
    (so the error or the value is DRF's own), a present one exactly as DRF
    runs it. Serializers with ``validate_<field>`` methods or dotted
    sources take DRF's way.
    """

    def to_internal_value(self, data):
        plan = self.__dict__.get("_present_plan")
        if plan is None:
            fields = list(self._writable_fields)
            simple = all(
                f.source_attrs == [f.field_name] and not hasattr(self, f"validate_{f.field_name}") for f in fields
            )
            plan = self.__dict__["_present_plan"] = fields if simple else ()
        if not plan or not isinstance(data, Mapping) or html.is_html_input(data):
            return super().to_internal_value(data)
        values, errors = {}, {}
        for field in plan:
            name = field.field_name
            if name in data:
                value = data[name]
            elif field.required or field.default is not serializers.empty:
                value = serializers.empty
            else:
                continue  # DRF: get_value() is empty, run_validation() raises SkipField
            try:
                values[name] = field.run_validation(value)
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
            except DjangoValidationError as exc:
                errors[name] = serializers.get_error_detail(exc)
            except serializers.SkipField:  # as in DRF's loop: a field may leave itself out
                pass
        if errors:
            raise serializers.ValidationError(errors)
        return values


class StrictKeysMixin:
    """Refuse keys the serializer does not declare, naming each of them."""

    unknown_key_message = "Unknown field."

    def to_internal_value(self, data):
        unknown = {}
        if isinstance(data, Mapping):
            unknown = {str(key): [self.unknown_key_message] for key in data if key not in self.fields}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, Mapping):
                raise serializers.ValidationError({**unknown, **exc.detail}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


@extend_schema_field({"type": "array", "items": {}})
class JSONListField(serializers.JSONField):
    """A JSON array of any JSON values (read-only: output)."""


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(serializers.JSONField):
    """A JSON object of any JSON values (read-only: output)."""


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "The last progress the running task reported, or null if it reported none.",
        "properties": {
            "current": {"type": "number", "nullable": True},
            "total": {"type": "number", "nullable": True, "description": "null: unknown."},
            "message": {"type": "string"},
            "updated_at": {
                "type": "string",
                "format": "date-time",
                "nullable": True,
                "description": "When it was reported.",
            },
            "text": {
                "type": "string",
                "description": "How pages show it: '116/1200', and the message "
                "only where it adds to the numbers ('116/1200 · importing'); docs/API.md.",
            },
        },
        "required": ["current", "total", "message", "updated_at", "text"],
    }
)
class ProgressField(serializers.Field):
    """A job's progress, ``{current, total, message, updated_at}`` (read-only: output).

    The row holds what the task passed to ``context.set_progress()`` plus the
    time of the report, read through ``validation.progress.shown``: what breaks
    its rule (a row written around it) comes out as null or "" rather than
    breaking the documented shape.
    """

    def __init__(self, **kwargs):
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value):
        shown = progress.shown(value)
        if shown is None:
            return None
        reported = shown["updated_at"]
        return {
            "current": shown["current"],
            "total": shown["total"],
            "message": shown["message"],
            "updated_at": TimeField().to_representation(reported) if reported else None,
            "text": shown["text"],
        }


class FilteredMixin:
    """A job's or a schedule's arguments as shown: ``conf.filtered`` (FILTER_ARGUMENTS' values are [FILTERED])."""

    def to_representation(self, value):
        from .. import conf

        return conf.filtered(super().to_representation(value))


class ArgsField(FilteredMixin, JSONListField):
    """A JSON array of any JSON values, secrets in it shown as [FILTERED] (read-only: output)."""


class KwargsField(FilteredMixin, JSONObjectField):
    """A JSON object of any JSON values, secrets in it shown as [FILTERED] (read-only: output)."""
