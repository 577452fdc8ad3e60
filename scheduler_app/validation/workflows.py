"""The rules of workflows' fields: a job's ``pass_results``, a workflow's name."""

from ..vocabulary.bounds import WORKFLOW_NAME_MAX
from .fields import Rule, Text


class Flag(Rule):
    """True or False (JSON's booleans, not 0 or 1)."""

    def __init__(self, field):
        super().__init__(field, "Must be true or false.")

    def check(self, value):
        if not isinstance(value, bool):
            self.fail()
        return value

    def schema(self):
        return {"type": "boolean"}


PASS_RESULTS = Flag("pass_results")
# A workflow's name (``scheduler_app.workflows``, POST /api/workflows/, the admin).
WORKFLOW_NAME = Text("name", WORKFLOW_NAME_MAX)
