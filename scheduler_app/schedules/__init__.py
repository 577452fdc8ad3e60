"""Recurring schedules: every state change of a Schedule, and when it runs next.

- ``timetable``: when a schedule runs (cron in a time zone, intervals, misfires);
- ``service``: the changes the admin and the API make (create, update, delete, run now);
- ``dispatch``: what the dispatcher asks (window, changes, materialise due runs);
- ``validation.schedules`` (below it): what a valid schedule is, field by field.
"""

from zoneinfo import ZoneInfo

from ..validation.schedules import CRON, EDITABLE, INTERVAL_MAX, JOB_FIELDS, NAME_MAX, TIMEZONE, TIMING_FIELDS
from .dispatch import MATERIALIZE_BATCH, changes, materialize_due, upcoming, window
from .service import clean, create, delete, disable, enable, run_now, set_enabled_many, update
from .timetable import CRON_HELP, coming_runs, describe, missed_runs, next_run, plan

validate_cron = CRON.check


def validate_timezone(name):
    """Return the ZoneInfo called ``name``; raise ValidationError for anything else."""
    return ZoneInfo(TIMEZONE.check(name))


__all__ = [
    "CRON_HELP",
    "EDITABLE",
    "INTERVAL_MAX",
    "JOB_FIELDS",
    "MATERIALIZE_BATCH",
    "NAME_MAX",
    "TIMING_FIELDS",
    "changes",
    "clean",
    "create",
    "delete",
    "coming_runs",
    "describe",
    "disable",
    "enable",
    "materialize_due",
    "missed_runs",
    "next_run",
    "plan",
    "run_now",
    "set_enabled_many",
    "update",
    "upcoming",
    "validate_cron",
    "validate_timezone",
    "window",
]
