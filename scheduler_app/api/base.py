"""What every view of the API shares: who may call it, how it reads and writes, how it is documented.

Stated on the views, not taken from the project's REST_FRAMEWORK settings:
the API authenticates, answers and fails the same way in any project,
whatever its DRF defaults, and a change of settings can neither open it
nor bring back a renderer that fails on what a client sent.
"""

from django.db import router
from rest_framework.authentication import SessionAuthentication, TokenAuthentication

from .. import conf
from ..models import Job
from ..sql.timeouts import bounded_statements
from .exceptions import exception_handler
from .middleware import early_error
from .pagination import EstimatedCountPagination
from .parsers import BoundedJSONParser
from .permissions import StaffModelPermission
from .renderers import SafeJSONRenderer
from .schema import SchedulerAutoSchema


# Mix into every view and declare ``required_permissions`` (see ``permissions``).
# (No docstring: drf-spectacular would repeat it as the description of every
# operation of every view.)
class SchedulerAPI:
    # Token first: its WWW-Authenticate header makes anonymous requests 401
    # (with session first, DRF answers 403). Session requests need CSRF.
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [StaffModelPermission]
    renderer_classes = [SafeJSONRenderer]
    parser_classes = [BoundedJSONParser]
    schema = SchedulerAutoSchema()
    required_permissions = {}

    def get_exception_handler(self):
        return exception_handler

    def dispatch(self, request, *args, **kwargs):
        # DRF's content negotiation reads the query string, and fails again while answering its own error.
        refused = early_error(request)
        if refused is not None:
            return refused
        # No statement of a request runs longer than REQUEST_STATEMENT_TIMEOUT (exceptions.py: 503).
        with bounded_statements(conf.get("REQUEST_STATEMENT_TIMEOUT"), router.db_for_read(Job)):
            return super().dispatch(request, *args, **kwargs)


class RowsAPI(SchedulerAPI):
    """A view of one table's rows: counted pages, no filters but those it declares, any id in a URL."""

    # Anything but a slash reaches get_object, which answers 404 for what is not an id.
    lookup_value_regex = "[^/]+"
    pagination_class = EstimatedCountPagination
    filter_backends = []


def audit(request, action, object_type="job", **fields):
    """Record an action taken through the API (``lifecycle.audit.record``, which logs it too)."""
    from ..lifecycle import audit as trail

    return trail.record(action, via="api", user=request.user, object_type=object_type, **fields)
