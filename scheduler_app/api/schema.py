"""The OpenAPI schema's view of the API: every error an operation really answers, and who may call it.

drf-spectacular documents what a view declares with ``extend_schema``;
the errors every view shares (authentication, permissions, unknown ids,
bodies DRF refuses) are added here from what the view is, so no operation
can forget one and a fuzzer finds no undeclared status code.

``_get_parameters``, ``_get_response_bodies`` and ``_map_basic_serializer``
are drf-spectacular's own hooks (private names; drf-standardized-errors
overrides the same); tests/api/test_schema.py fails if they stop working.
"""

import contextlib

from drf_spectacular import utils as spectacular_utils
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_view_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.settings import api_settings

from .permissions import required_permissions

DETAIL_ERROR = OpenApiResponse(
    {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]},
    description='{"detail": "..."}',
)
FIELD_ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description='Errors by field name: {"field": ["message", ...]}; {"detail": "..."} for a body that is not JSON.',
)
QUERY_ERRORS = OpenApiResponse(OpenApiTypes.OBJECT, description='A bad query parameter: {"parameter": ["message"]}.')


def detail(description):
    return OpenApiResponse(DETAIL_ERROR.response, description=f'{description} {{"detail": "..."}}')


def needs_text(permissions):
    """Return the sentence that says what a caller needs."""
    if not permissions:
        return "Needs a staff user (no model permission)."
    return " ".join(f"Needs the {name} permission." for name in permissions)


class SchedulerAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the shared errors and the permission each operation needs."""

    def is_excluded(self):
        # A class attribute, not @extend_schema(exclude=True): that decorator
        # builds on DRF's DEFAULT_SCHEMA_CLASS, which a project need not set.
        return getattr(self.view, "exclude_from_schema", False) or super().is_excluded()

    def get_description(self):
        own = super().get_description()
        needed = required_permissions(self.view, self.view.request)
        sentence = needs_text(needed) if needed is not None else "Nobody may call this."
        return f"{own}\n\n{sentence}" if own else sentence

    def shared_errors(self):
        """Return ``{status: response}`` for the errors this operation answers besides its own."""
        needed = required_permissions(self.view, self.view.request)
        errors = {
            "401": detail("No credentials, or bad ones."),
            "403": detail(f"Not a staff user, or without {' and '.join(needed)}." if needed else "Not a staff user."),
            "406": detail("The Accept header does not allow JSON."),
        }
        if "{" in self.path:
            errors["404"] = detail("Nothing has this id or name.")
        if self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None:
            errors["400"] = FIELD_ERRORS
            errors["413"] = detail("The body is larger than the API reads.")
            errors["415"] = detail("The body is not JSON.")
        if self.method == "GET" and self._is_list_view() and getattr(self.view, "paginator", None):
            errors["400"] = QUERY_ERRORS
            errors["404"] = detail("A page past the end, or not a page number.")
        return errors

    def get_override_parameters(self):
        # The routes take anything but a slash as an id, so that the view's
        # own 404 answers /api/jobs/0.5/; what a client should send is the
        # model's integer primary key.
        parameters = list(super().get_override_parameters())
        model = get_view_model(self.view, emit_warnings=False)
        if "{id}" in self.path and model is not None:
            description = f"The {model._meta.verbose_name}'s id."
            parameters.append(OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description=description))
        return parameters

    def _get_parameters(self):
        # An empty query parameter (?queue=) counts as not given, on every endpoint.
        parameters = super()._get_parameters()
        for parameter in parameters:
            if parameter["in"] == "query":
                parameter["allowEmptyValue"] = True
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code, response in self.shared_errors().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return dict(sorted(responses.items()))


class StrictKeysExtension(OpenApiSerializerExtension):
    """Bodies that refuse unknown keys (``StrictKeysMixin``) say so: ``additionalProperties: false``.

    A serializer's ``openapi_extra`` adds what its ``validate()`` demands
    of the whole body (``minProperties``).
    """

    target_class = "scheduler_app.api.fields.StrictKeysMixin"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        return {**schema, "additionalProperties": False, **getattr(self.target, "openapi_extra", {})}


def only_this_api(endpoints, **kwargs):
    """drf-spectacular preprocessing hook: keep the scheduler's endpoints, wherever they are mounted.

    The schema view walks the project's whole URLconf; another project's
    own DRF views are not this API's. Views marked ``exclude_from_schema``
    (the schema itself, its UI, the catch-all 404) leave here, before
    drf-spectacular builds anything for them.
    """
    kept = []
    for path, regex, method, callback in endpoints:
        view = getattr(callback, "cls", None)
        if getattr(view, "__module__", "").startswith("scheduler_app.") and not getattr(
            view, "exclude_from_schema", False
        ):
            kept.append((path, regex, method, callback))
    return kept


@contextlib.contextmanager
def _our_default_schema():
    """Make drf-spectacular's decorators build on SchedulerAutoSchema, whatever the project's settings.

    ``@extend_schema`` on a method builds its schema class on DRF's
    ``DEFAULT_SCHEMA_CLASS``; a project that never configured
    drf-spectacular has DRF's own there, and the result cannot generate a
    schema. The scheduler's API must not ask projects to configure DRF.
    """
    saved = api_settings.DEFAULT_SCHEMA_CLASS
    api_settings.DEFAULT_SCHEMA_CLASS = SchedulerAutoSchema
    try:
        yield
    finally:
        api_settings.DEFAULT_SCHEMA_CLASS = saved


def extend_schema(**kwargs):
    """drf-spectacular's ``extend_schema``, built on SchedulerAutoSchema (see ``_our_default_schema``)."""
    decorate = spectacular_utils.extend_schema(**kwargs)

    def apply(target):
        with _our_default_schema():
            return decorate(target)

    return apply


def extend_schema_view(**kwargs):
    """drf-spectacular's ``extend_schema_view``, built on SchedulerAutoSchema."""
    decorate = spectacular_utils.extend_schema_view(**kwargs)

    def apply(view):
        with _our_default_schema():
            return decorate(view)

    return apply
