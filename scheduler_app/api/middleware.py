"""Every answer under the API's path is JSON, whatever DEBUG says and wherever the error arose.

``APIErrorsMiddleware``, first in ``MIDDLEWARE`` (README, docs/API.md), for
requests under the path of ``scheduler_api:root`` (``/api/``):

- reads what Django parses lazily, before any other middleware or the view
  does: the host (``ALLOWED_HOSTS``: a ``DisallowedHost`` is a 400), the
  query string (more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` parameters: 400),
  the declared body size (over ``DATA_UPLOAD_MAX_MEMORY_SIZE``: 413); each
  answered in JSON here, where Django would answer an HTML page (or, with
  DEBUG on, its debug page, which itself failed on the query string: a 500);
- turns any other error answer that is not JSON (a 500 page, a 404 of
  another URLconf, CSRF's 403) into ``{"detail": "..."}`` with its status.

Without it the views still answer JSON for what reaches them
(``base.SchedulerAPI.dispatch``, ``exceptions.exception_handler``).
"""

from django.core.exceptions import DisallowedHost, SuspiciousOperation
from django.http import JsonResponse
from django.urls import NoReverseMatch, reverse

from .exceptions import max_body_size


def api_prefix():
    try:
        return reverse("scheduler_api:root")
    except NoReverseMatch:  # the project does not mount the API
        return None


def early_error(request):
    """Return the JSON answer to what Django would refuse later as HTML, or None."""
    try:
        request.get_host()
    except DisallowedHost:
        return JsonResponse({"detail": "Invalid Host header: not in ALLOWED_HOSTS."}, status=400)
    try:
        request.GET  # noqa: B018  (parsed here: too many parameters)
    except SuspiciousOperation as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return JsonResponse({"detail": "Invalid Content-Length header."}, status=400)
    if declared > max_body_size():
        return JsonResponse({"detail": f"Request body exceeds {max_body_size()} bytes."}, status=413)
    return None


class APIErrorsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        prefix = api_prefix()
        if prefix is None or not request.path_info.startswith(prefix):
            return self.get_response(request)
        response = early_error(request) or self.get_response(request)
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith("application/json"):
            json = JsonResponse({"detail": response.reason_phrase or "Error."}, status=response.status_code)
            for header in ("Allow", "WWW-Authenticate", "Retry-After"):
                if header in response:
                    json[header] = response[header]
            return json
        return response
