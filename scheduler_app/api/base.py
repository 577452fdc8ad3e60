"""What every view of the API shares: who may call it, how it reads and writes, how it is documented.

Stated on the views, not only as the project's REST_FRAMEWORK defaults, so
that a change of settings can neither open the API nor bring back a
renderer that fails on what a client sent.
"""

from .parsers import BoundedJSONParser
from .permissions import StaffModelPermission
from .renderers import SafeJSONRenderer
from .schema import SchedulerAutoSchema


# Mix into every view and declare ``required_permissions`` (see ``permissions``).
# (No docstring: drf-spectacular would repeat it as the description of every
# operation of every view.)
class SchedulerAPI:
    permission_classes = [StaffModelPermission]
    renderer_classes = [SafeJSONRenderer]
    parser_classes = [BoundedJSONParser]
    schema = SchedulerAutoSchema()
    required_permissions = {}
