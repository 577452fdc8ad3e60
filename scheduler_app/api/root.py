"""GET /api/ (the endpoints, by name), the schema and its UI, and the JSON 404 for every other path."""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.urls import reverse as django_reverse
from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, NotFound, PermissionDenied
from rest_framework.renderers import TemplateHTMLRenderer
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

import scheduler_app

from .base import SchedulerAPI
from .permissions import ANY, STAFF
from .schema import extend_schema

ENDPOINTS = {
    "jobs": "scheduler_api:job-list",
    "tasks": "scheduler_api:task-list",
    "workers": "scheduler_api:worker-list",
    "queues": "scheduler_api:queue-list",
    "schedules": "scheduler_api:schedule-list",
    "workflows": "scheduler_api:workflow-list",
    "audit": "scheduler_api:audit-list",
    "stats": "scheduler_api:stats",
    "history": "scheduler_api:history",
    "schema": "scheduler_api:schema",
    "docs": "scheduler_api:docs",
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


# The schema's own settings: whatever the project's SPECTACULAR_SETTINGS say,
# this schema describes this API (and only it, wherever it is mounted).
SCHEMA_SETTINGS = {
    "TITLE": "Scheduler API",
    "DESCRIPTION": "Schedule, monitor and steer jobs.",
    "VERSION": scheduler_app.__version__,
    "PREPROCESSING_HOOKS": ["scheduler_app.api.schema.only_this_api"],
    # One name for the choice as created, one for it as shown (the job and the list's entries).
    "ENUM_NAME_OVERRIDES": {
        "OnDependencyFailureEnum": ["cancel", "run"],
        "JobOnDependencyFailureEnum": "scheduler_app.models.DependencyFailure",
    },
}


class SchemaView(SpectacularAPIView):
    authentication_classes = SchedulerAPI.authentication_classes
    permission_classes = SchedulerAPI.permission_classes
    schema = SchedulerAPI.schema
    required_permissions = {ANY: STAFF}
    custom_settings = SCHEMA_SETTINGS
    exclude_from_schema = True  # the schema does not describe its own endpoint

    def get_exception_handler(self):
        return SchedulerAPI.get_exception_handler(self)


class DocsView(APIView):
    """Swagger UI over the schema, from the app's own static files (no CDN, no extra app)."""

    exclude_from_schema = True
    authentication_classes = SchedulerAPI.authentication_classes
    permission_classes = SchedulerAPI.permission_classes
    schema = SchedulerAPI.schema
    required_permissions = {ANY: STAFF}
    renderer_classes = [TemplateHTMLRenderer]
    template_name = "scheduler_app/api/swagger_ui.html"

    def handle_exception(self, exc):
        # A browser that is not signed in goes to the admin's login and comes
        # back here; an API client (no text/html in Accept) gets the JSON 401.
        signed_out = isinstance(exc, (NotAuthenticated, AuthenticationFailed)) or (
            isinstance(exc, PermissionDenied) and not self.request.user.is_authenticated
        )
        if signed_out and "text/html" in self.request.headers.get("Accept", ""):
            return redirect_to_login(self.request.get_full_path(), login_url=django_reverse("admin:login"))
        return super().handle_exception(exc)

    def get(self, request):
        header = settings.CSRF_HEADER_NAME.removeprefix("HTTP_").replace("_", "-")
        return Response(
            {
                "title": SCHEMA_SETTINGS["TITLE"],
                "swagger": {
                    "schemaUrl": reverse("scheduler_api:schema", request=request),
                    "csrfCookie": settings.CSRF_COOKIE_NAME,
                    "csrfHeader": header,
                },
            },
            headers={"Cross-Origin-Opener-Policy": "unsafe-none"},
        )


class NotFoundView(SchedulerAPI, APIView):
    """Answer 404 in JSON for any path under /api/ that no endpoint serves (after the usual checks).

    Only staff learn that a path does not exist: others get the 401 or 403
    that every endpoint gives them.
    """

    required_permissions = {ANY: STAFF}
    exclude_from_schema = True

    def not_found(self, request, *args, **kwargs):
        hint = "" if request.path.endswith("/") else " Paths under /api/ end with a slash."
        raise NotFound(f"No endpoint here.{hint} GET /api/ lists them.")

    get = post = put = patch = delete = head = options = trace = not_found
