"""The rules of workflows' fields: a job's ``pass_results``, a workflow's name."""

from ..vocabulary.bounds import WORKFLOW_NAME_MAX
from .fields import Text
from .schedules import Flag  # the one rule of a JSON boolean

PASS_RESULTS = Flag("pass_results")
# A workflow's name (``scheduler_app.workflows``, POST /api/workflows/, the admin).
WORKFLOW_NAME = Text("name", WORKFLOW_NAME_MAX)
