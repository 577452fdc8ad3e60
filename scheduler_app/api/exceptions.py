"""Map the lifecycle service's exceptions to DRF's error responses."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from .. import conf
from ..lifecycle import InvalidTransition
from ..models import Job
from ..sql.timeouts import is_timeout


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The job is not in a state that allows this."
    default_code = "conflict"


# Django's default DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB).
DEFAULT_MAX_BODY = 2_621_440


def max_body_size():
    """Return the largest request body the API reads, in bytes."""
    limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", DEFAULT_MAX_BODY)
    return DEFAULT_MAX_BODY if limit is None else limit


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self, limit):
        super().__init__(f"Request body exceeds {limit} bytes.")


class StatementTimedOut(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "statement_timeout"
    default_detail = "The database took too long to answer this request; try a narrower filter, or again later."


def timeout_text():
    return f"(No statement may run longer than {conf.get('REQUEST_STATEMENT_TIMEOUT'):g} s: REQUEST_STATEMENT_TIMEOUT.)"


def exception_handler(exc, context):
    """Return DRF's usual error response, also for the lifecycle's exceptions.

    InvalidTransition -> 409, Job.DoesNotExist -> 404, django ValidationError
    -> 400 with errors by field, a body over DATA_UPLOAD_MAX_MEMORY_SIZE -> 413,
    a statement cancelled by REQUEST_STATEMENT_TIMEOUT -> 503.
    """
    if is_timeout(exc):
        exc = StatementTimedOut(f"{StatementTimedOut.default_detail} {timeout_text()}")
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(max_body_size())
    elif isinstance(exc, InvalidTransition):
        exc = Conflict(str(exc))
    elif isinstance(exc, Job.DoesNotExist):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    return drf_exception_handler(exc, context)
