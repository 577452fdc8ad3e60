"""The job list's bounded values: at most ``LIST_VALUE_BYTES`` of each job's args, kwargs and result.

A page of the list holds up to 500 jobs, and each value may be a megabyte
(``ARGS_MAX_BYTES``, ``RESULT_MAX_BYTES``): the database sends only the
first ``LIST_VALUE_BYTES + 1`` characters of each value's JSON text (as it
prints it: PostgreSQL's ``jsonb`` text, SQLite's stored text). A value whose
text fits in ``LIST_VALUE_BYTES`` bytes is the value; a longer one is
replaced by a string, the first ``LIST_VALUE_BYTES`` bytes of its text (cut
at a character boundary), and named in the job's ``truncated``. The job's
own endpoint returns every value whole.
"""

import json

from django.db.models import TextField
from django.db.models.functions import Cast, Left

from ..vocabulary.bounds import LIST_VALUE_BYTES

BOUNDED = ("args", "kwargs", "result")


def bounded(queryset):
    """Return ``queryset`` without the bounded values, with the heads of their JSON text instead."""
    heads = {f"{name}_head": Left(Cast(name, TextField()), LIST_VALUE_BYTES + 1) for name in BOUNDED}
    return queryset.defer(*BOUNDED).annotate(**heads)


def fill(jobs):
    """Set each job's bounded values from the heads ``bounded`` read, and its ``truncated`` names."""
    for job in jobs:
        truncated = []
        for name in BOUNDED:
            value, whole = _value(getattr(job, f"{name}_head"))
            setattr(job, name, value)
            if not whole:
                truncated.append(name)
        job.truncated = truncated
    return jobs


def _value(head):
    """Return ``(value, whole)`` for the head of a value's JSON text."""
    if head is None:
        return None, True
    if len(head) <= LIST_VALUE_BYTES and (
        head.isascii() or len(head.encode("utf-8", "surrogatepass")) <= LIST_VALUE_BYTES
    ):
        return json.loads(head), True
    cut = head.encode("utf-8", "surrogatepass")[:LIST_VALUE_BYTES]
    return cut.decode("utf-8", "ignore"), False
