"""When a schedule runs: cron and interval timetables, time zones, misfires.

Pure functions of a schedule's fields (a Schedule or a dict of its fields);
nothing here touches the database.

- Cron expressions have five fields and are evaluated in the schedule's
  IANA time zone by cronsim, which follows Debian cron on DST changes: a
  job at a fixed local time that does not exist (spring forward) runs at
  the first valid minute after it; one at an ambiguous time (fall back)
  runs once, at the first occurrence. Expressions with a wildcard minute
  or hour (``*/15 * * * *``) run by elapsed time, in both folds.
- Intervals are anchored: runs are at ``anchor + k * interval`` where the
  anchor is the previous run time (or ``start_at``), so they never drift.
"""

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from .. import conf
from ..models import MisfirePolicy
from ..validation.schedules import CRON_HELP, zone_names  # noqa: F401  (re-exported)
from ..vocabulary.bounds import LATEST


def _get(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class BeyondLatest(Exception):
    """The schedule's next run would fall after ``bounds.LATEST``, the end of stored time."""


def next_run(schedule, after, *, anchor=None, strict=False):
    """Return the first run time strictly after ``after`` (aware, UTC), or None.

    ``schedule`` is a Schedule or a dict of its fields. For an interval,
    ``anchor`` is the previous run time; without one runs are anchored on
    ``start_at``, and without that the first run is one interval after
    ``after``. None: the schedule has ended (``end_at``), never matches, or
    its next run would fall after ``bounds.LATEST`` (``strict``: raise
    BeyondLatest for that instead; ``service.clean`` refuses such schedules).
    Never raises OverflowError.
    """
    try:
        result = _next_run(schedule, after, anchor)
        if result is not None and result > LATEST:
            raise OverflowError
    except OverflowError:  # datetime's range ends in year 9999, as stored time does
        if strict:
            raise BeyondLatest() from None
        return None
    return result


def _next_run(schedule, after, anchor):
    start_at = _get(schedule, "start_at")
    end_at = _get(schedule, "end_at")
    interval = _get(schedule, "interval_seconds")
    if interval:
        step = timedelta(seconds=interval)
        base = anchor or start_at
        if base is None:
            result = after + step
        elif after < base:
            result = base
        else:
            k = math.floor((after - base) / step) + 1
            result = base + k * step
    else:
        zone = ZoneInfo(_get(schedule, "timezone") or "UTC")
        if start_at is not None and after < start_at:
            after = start_at - timedelta(microseconds=1)
        it = CronSim(_get(schedule, "cron"), after.astimezone(zone))
        result = None
        try:
            # A fixed-time cron iterates in local wall time; after the second
            # pass of an ambiguous hour, it can return the first pass again.
            for _ in range(1000):
                candidate = next(it)
                if candidate > after:
                    result = candidate
                    break
        except StopIteration:
            return None
        if result is None:
            return None
    if end_at is not None and result > end_at:
        return None
    return result.astimezone(UTC)


def missed_runs(schedule, first, now, limit):
    """Return up to ``limit`` most recent run times from ``first`` to ``now``, oldest first."""
    interval = _get(schedule, "interval_seconds")
    runs = []
    if interval:
        step = timedelta(seconds=interval)
        try:
            last = first + math.floor((now - first) / step) * step
            while len(runs) < limit and last >= first:
                runs.append(last)
                last -= step
        except OverflowError:  # stepped back past year 1: before ``first`` anyway
            pass
        return sorted(runs)
    zone = ZoneInfo(_get(schedule, "timezone") or "UTC")
    try:
        it = CronSim(_get(schedule, "cron"), (now + timedelta(seconds=1)).astimezone(zone), reverse=True)
        while len(runs) < limit:
            t = next(it).astimezone(UTC)
            if t < first:
                break
            if t <= now and t not in runs:
                runs.append(t)
    except (StopIteration, OverflowError):  # no earlier match, or past either end of time
        pass
    if first not in runs and len(runs) < limit:
        runs.append(first)
    return sorted(runs)


def plan(schedule, run_time, now):
    """Return ``(run times to enqueue, next run_at)`` for a schedule due at ``run_time``.

    ``catch_up`` enqueues one job per run time from ``run_time`` to ``now``
    (at most SCHEDULE_CATCH_UP_MAX, the most recent), however late: an
    interval shorter than the grace period still gets every run. For the
    others the misfire policy decides what a late schedule (``now`` more
    than SCHEDULE_MISFIRE_GRACE seconds past ``run_time``) does:
    ``run_once`` enqueues one job for all missed runs, ``skip`` enqueues
    none. Then the schedule moves to its first run after ``now``.
    """
    late = (now - run_time).total_seconds() > conf.get("SCHEDULE_MISFIRE_GRACE")
    policy = _get(schedule, "misfire_policy")
    if policy == MisfirePolicy.SKIP and late:
        runs = []
    elif policy == MisfirePolicy.CATCH_UP:
        runs = missed_runs(schedule, run_time, now, conf.get("SCHEDULE_CATCH_UP_MAX"))
    else:
        runs = [run_time]
    return runs, next_run(schedule, now, anchor=run_time)


def coming_runs(schedule, count, now):
    """Return the next ``count`` run times (aware, UTC), fewer where the schedule ends; [] when it is disabled.

    The first is the stored ``next_run_at`` when there is one (a saved
    schedule: what the dispatchers will run, even if overdue), else the
    first run after ``now``; each next one follows the one before.
    """
    if not _get(schedule, "enabled", True):
        return []
    run = _get(schedule, "next_run_at") or next_run(schedule, now, anchor=_get(schedule, "last_run_at"))
    runs = []
    while run is not None and len(runs) < count:
        runs.append(run.astimezone(UTC))
        run = next_run(schedule, run, anchor=run)
    return runs


def describe(schedule):
    """Return a human-readable description, e.g. 'At 02:00 on Monday through Friday (Europe/Berlin)'."""
    interval = _get(schedule, "interval_seconds")
    if interval:
        return f"Every {_duration(interval)}"
    expr = _get(schedule, "cron") or ""
    try:
        text = CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC)).explain()
    except Exception:  # noqa: BLE001 - an invalid or unusual expression: show it as typed
        text = expr
    zone = _get(schedule, "timezone") or "UTC"
    return f"{text} ({zone})"


def _duration(seconds):
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}s" if n != 1 else unit
    return f"{seconds} seconds" if seconds != 1 else "second"


def _epoch(value):
    return value.timestamp() if value is not None else None
