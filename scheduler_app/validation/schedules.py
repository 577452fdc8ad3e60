"""What a valid schedule is: one rule per schedule field (the job it makes is checked as any job, by ``build_job``).

``service.clean`` applies them; the admin form and the API hand values to
them and translate their errors, as for jobs.
"""

import functools
from datetime import UTC, datetime
from zoneinfo import available_timezones

from cronsim import CronSim, CronSimError

from ..vocabulary.bounds import CRON_MAX, NEXT_RUNS_MAX, SCHEDULE_NAME_MAX
from . import durations
from .fields import LATEST_TEXT, Duration, Moment, Rule, Text, WholeNumber, shown

CRON_HELP = "5 fields: minute hour day-of-month month day-of-week, e.g. '0 2 * * 1-5'."
# What a schedule does about runs it missed (the model's MisfirePolicy is made from this).
MISFIRE_POLICIES = {
    "run_once": "Run once now for missed runs",
    "skip": "Skip missed runs",
    "catch_up": "Catch up missed runs (bounded)",
}


@functools.cache
def zone_names():
    """Return the IANA time zone names a schedule may use (``localtime`` is the host's: not one)."""
    return (frozenset(available_timezones()) | {"UTC"}) - {"localtime", "posixrules", "Factory"}


NAME_MAX = SCHEDULE_NAME_MAX
INTERVAL_MAX = 366 * 24 * 3600
TIMING_FIELDS = ("cron", "interval_seconds", "timezone", "start_at", "end_at")
JOB_FIELDS = ("task", "args", "kwargs", "queue", "priority", "max_attempts", "timeout")
# A schedule whose next run would fall after bounds.LATEST (service.clean).
PAST_LATEST = f"The next run would fall after {LATEST_TEXT}, the latest time the scheduler stores."
# The fields a person or a request may set: the admin form and the API's
# write serializer both use this list.
EDITABLE = ("name", *JOB_FIELDS, *TIMING_FIELDS, "enabled", "misfire_policy")


class Name(Text):
    """Non-blank text, stripped."""

    required = "This field is required."

    def check(self, value):
        if value is None or (isinstance(value, str) and not value.strip()):
            self.fail(self.required)
        return super().check(value.strip() if isinstance(value, str) else value)

    def schema(self):
        # Some character that is neither white space nor NUL.
        return {**super().schema(), "minLength": 1, "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"}


class Cron(Rule):
    def __init__(self):
        super().__init__("cron", f"Must be text. {CRON_HELP}")

    def check(self, expr):
        """Return the normalised expression (single spaces)."""
        if not isinstance(expr, str) or len(expr) > CRON_MAX:
            self.fail()
        parts = expr.split()
        if len(parts) != 5:
            self.fail(f"Invalid cron expression {expr!r}: {len(parts)} fields given. {CRON_HELP}")
        normal = " ".join(parts)
        try:
            next(CronSim(normal, datetime(2000, 1, 1, tzinfo=UTC)))
        except CronSimError as exc:
            self.fail(f"Invalid cron expression {expr!r}: {exc}. {CRON_HELP}")
        except StopIteration:
            self.fail(f"The cron expression {expr!r} never matches a date.")
        return normal

    def schema(self):
        return {"type": "string", "maxLength": CRON_MAX}


class Zone(Rule):
    """An IANA time zone name; not ``localtime`` (it would depend on the host)."""

    def __init__(self):
        super().__init__("timezone", "")

    def check(self, name):
        if not isinstance(name, str) or name not in zone_names():
            self.fail(
                f"Unknown time zone {shown(name)}. Use an IANA name such as "
                "'Europe/Berlin', 'America/New_York' or 'UTC'."
            )
        return name

    def schema(self):
        return {"type": "string", "enum": sorted(zone_names())}


class Choice(Rule):
    def __init__(self, field, values):
        super().__init__(field, f"Must be one of {', '.join(values)}.")
        self.values = tuple(values)

    def check(self, value):
        if value not in self.values:
            self.fail()
        return value

    def schema(self):
        return {"type": "string", "enum": list(self.values)}


class Flag(Rule):
    """True or False (JSON's booleans, not 0 or 1): a schedule's ``enabled``, a job's ``pass_results``."""

    def __init__(self, field):
        super().__init__(field, "Must be true or false.")

    def check(self, value):
        if not isinstance(value, bool):
            self.fail()
        return value

    def schema(self):
        return {"type": "boolean"}


class WholeDuration(Duration):
    """A ``Duration`` of whole seconds from ``low`` to ``high`` (a schedule's interval): ``300``, ``"300"``,
    ``"5m"``; ``check`` returns an int."""

    def __init__(self, field, low, high):
        super().__init__(field, high)
        self.low = low
        self.message = f"Must be a whole number of seconds from {low} to {high}, or {durations.FORMS}."

    def check(self, value):
        seconds = durations.seconds_of(value)
        if seconds is None or not self.low <= seconds <= self.high or seconds != int(seconds):
            self.fail()
        return int(seconds)

    def schema(self):
        number = {"type": "integer", "minimum": self.low, "maximum": self.high}
        text = {"type": "string", "example": "5m", "description": f"seconds as text, or {durations.FORMS}"}
        return {"oneOf": [number, text]}


NAME = Name("name", NAME_MAX)
CRON = Cron()
INTERVAL = WholeDuration("interval_seconds", 1, INTERVAL_MAX)
# How many coming run times GET /api/schedules/{id}/next/?count= answers.
NEXT_COUNT = WholeNumber("count", 1, NEXT_RUNS_MAX)
TIMEZONE = Zone()
START_AT = Moment("start_at")
END_AT = Moment("end_at")
ENABLED = Flag("enabled")
MISFIRE_POLICY = Choice("misfire_policy", tuple(MISFIRE_POLICIES))
