"""GET /api/ (the endpoints, by name), the schema and its UI, and the JSON 404 for every other path."""

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from .base import SchedulerAPI
from .permissions import ANY, STAFF

ENDPOINTS = {
    "jobs": "api:job-list",
    "tasks": "api:task-list",
    "workers": "api:worker-list",
    "queues": "api:queue-list",
    "schedules": "api:schedule-list",
    "stats": "api:stats",
    "schema": "api:schema",
    "docs": "api:docs",
}


class APIRootView(SchedulerAPI, APIView):
    required_permissions = {ANY: STAFF}

    @extend_schema(
        summary="The API's endpoints by name",
        responses={
            200: {
                "type": "object",
                "properties": {name: {"type": "string", "format": "uri"} for name in ENDPOINTS},
                "required": list(ENDPOINTS),
            }
        },
    )
    def get(self, request):
        return Response({name: reverse(url_name, request=request) for name, url_name in ENDPOINTS.items()})


class SchemaView(SpectacularAPIView):
    permission_classes = SchedulerAPI.permission_classes
    required_permissions = {ANY: STAFF}


class DocsView(SpectacularSwaggerView):
    permission_classes = SchedulerAPI.permission_classes
    required_permissions = {ANY: STAFF}


@extend_schema(exclude=True)
class NotFoundView(SchedulerAPI, APIView):
    """Answer 404 in JSON for any path under /api/ that no endpoint serves (after the usual checks).

    Only staff learn that a path does not exist: others get the 401 or 403
    that every endpoint gives them.
    """

    required_permissions = {ANY: STAFF}

    def not_found(self, request, *args, **kwargs):
        hint = "" if request.path.endswith("/") else " Paths under /api/ end with a slash."
        raise NotFound(f"No endpoint here.{hint} GET /api/ lists them.")

    get = post = put = patch = delete = head = options = trace = not_found
