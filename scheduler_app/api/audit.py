"""GET /api/audit/: the audit trail, newest first, for users with ``view_auditevent``.

Filters: ``object_type`` and ``object_id`` (one object's events), ``user``
(a user name), ``action`` and ``via``. A value no event could have is a
400 with the field's error, never an empty list that looks like "nothing
happened".
"""

from django.core.exceptions import ValidationError as RuleError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import mixins, serializers, viewsets
from rest_framework.exceptions import ValidationError

from ..models import AuditEvent, ObjectType, Via
from ..validation.fields import Text
from ..vocabulary.bounds import AUDIT_ACTION_MAX, AUDIT_OBJECT_ID_MAX, AUDIT_USERNAME_MAX
from .base import RowsAPI
from .permissions import needs
from .schema import QUERY_ERRORS, extend_schema, extend_schema_view

# An object's id as an integer where the object has one (all but queues, named).
NAMED_TYPES = {ObjectType.QUEUE}


class AuditEventSerializer(serializers.ModelSerializer):
    user = serializers.SerializerMethodField(help_text="Who: a user name; for a command, the system user.")
    object_id = serializers.SerializerMethodField(
        help_text="The object's id (a queue's name); null for a bulk action (see filter and count)."
    )

    class Meta:
        model = AuditEvent
        fields = ["id", "at", "user", "action", "object_type", "object_id", "filter", "count", "via", "detail"]
        read_only_fields = fields

    def get_user(self, event) -> str | None:
        return event.username or None

    @staticmethod
    def get_object_id(event) -> int | str | None:
        if event.object_id is None or event.object_type in NAMED_TYPES or not event.object_id.isdigit():
            return event.object_id
        return int(event.object_id)


# Text filters: query parameter -> (column, its rule: the check and the schema).
_TEXT = {
    "object_id": ("object_id", Text("object_id", AUDIT_OBJECT_ID_MAX)),
    "user": ("username", Text("user", AUDIT_USERNAME_MAX)),
    "action": ("action", Text("action", AUDIT_ACTION_MAX)),
}
_CHOICE = {"object_type": ObjectType, "via": Via}

PARAMETERS = [
    OpenApiParameter(
        "object_type",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        enum=ObjectType.values,
        description="The kind of object.",
    ),
    OpenApiParameter(
        "object_id",
        _TEXT["object_id"][1].schema(),
        OpenApiParameter.QUERY,
        description=f"One object's id (a queue's name), up to {AUDIT_OBJECT_ID_MAX} characters.",
    ),
    OpenApiParameter(
        "user", _TEXT["user"][1].schema(), OpenApiParameter.QUERY, description="Who (a user name, exactly)."
    ),
    OpenApiParameter(
        "action",
        _TEXT["action"][1].schema(),
        OpenApiParameter.QUERY,
        description="What, e.g. cancel, retry, bulk_cancel, pause, edit, delete, prune.",
    ),
    OpenApiParameter("via", OpenApiTypes.STR, OpenApiParameter.QUERY, enum=Via.values, description="Which door."),
]


def audit_filters(params):
    """Return the ORM filters the query string asks for; ValidationError with every bad field."""
    found, errors = {}, {}
    for name, choices in _CHOICE.items():
        value = params.get(name)
        if value:
            if value not in choices.values:
                errors[name] = [f"Must be one of: {', '.join(choices.values)}."]
            else:
                found[name] = value
    for name, (column, rule) in _TEXT.items():
        value = params.get(name)
        if value:
            try:
                found[column] = rule.check(value)
            except RuleError as error:
                errors[name] = error.message_dict[name]
    if errors:
        raise ValidationError(errors)
    return found


@extend_schema_view(
    list=extend_schema(
        summary="The audit trail: who did what, newest first",
        parameters=PARAMETERS,
        responses={200: AuditEventSerializer(many=True), 400: QUERY_ERRORS},
    )
)
class AuditEventViewSet(RowsAPI, mixins.ListModelMixin, viewsets.GenericViewSet):
    required_permissions = {"list": needs("view", AuditEvent)}
    serializer_class = AuditEventSerializer

    def get_queryset(self):
        return AuditEvent.objects.filter(**audit_filters(self.request.query_params)).order_by("-at", "-id")
