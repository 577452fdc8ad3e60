"""Recurring schedules: every state change of a Schedule, and when it runs next.

The admin and the API call :func:`create`, :func:`update`, :func:`delete`,
:func:`enable`, :func:`disable` and :func:`run_now`; the dispatcher calls
:func:`window`, :func:`changes` and :func:`materialize_due`.

A schedule runs exactly once per run time, however many dispatchers share
the database: the dispatcher that moves ``next_run_at`` forward with one
compare-and-set UPDATE (``WHERE id = ... AND next_run_at = <the value read>``)
is the only one that enqueues the run's job, in the same transaction. The
job's ``unique_key`` (``schedule:<id>:<run time>``) is a second guard.

Time semantics (see docs/SCHEDULES.md):

- Cron expressions have five fields and are evaluated in the schedule's
  IANA time zone by cronsim, which follows Debian cron on DST changes: a
  job at a fixed local time that does not exist (spring forward) runs at
  the first valid minute after it; one at an ambiguous time (fall back)
  runs once, at the first occurrence. Expressions with a wildcard minute
  or hour (``*/15 * * * *``) run by elapsed time, in both folds.
- Intervals are anchored: runs are at ``anchor + k * interval`` where the
  anchor is the previous run time (or ``start_at``), so they never drift.
"""

import functools
import logging
import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone as dj_timezone

from . import conf, lifecycle
from .models import MisfirePolicy, Schedule

logger = logging.getLogger(__name__)

NAME_MAX = 200
INTERVAL_MAX = 366 * 24 * 3600
# Schedules the dispatcher materialises per call; the rest wait for the next.
MATERIALIZE_BATCH = 100
TIMING_FIELDS = ("cron", "interval_seconds", "timezone", "start_at", "end_at")
JOB_FIELDS = ("task", "args", "kwargs", "queue", "priority", "max_attempts", "timeout")
EDITABLE = (
    "name",
    *JOB_FIELDS,
    *TIMING_FIELDS,
    "enabled",
    "misfire_policy",
)
CRON_HELP = "5 fields: minute hour day-of-month month day-of-week, e.g. '0 2 * * 1-5'."


def _get(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


# ---------------------------------------------------------------------------
# Validation


@functools.cache
def _zone_names():
    return frozenset(available_timezones()) | {"UTC"}


def validate_timezone(name):
    """Return the ZoneInfo called ``name``; raise ValidationError for anything else."""
    if not isinstance(name, str) or name not in _zone_names():
        raise ValidationError(
            {"timezone": f"Unknown time zone {name!r}. Use an IANA name such as "
             "'Europe/Berlin', 'America/New_York' or 'UTC'."}
        )
    return ZoneInfo(name)


def validate_cron(expr):
    """Return the normalised expression (single spaces); raise ValidationError."""
    if not isinstance(expr, str):
        raise ValidationError({"cron": f"Must be text. {CRON_HELP}"})
    parts = expr.split()
    if len(parts) != 5:
        raise ValidationError(
            {"cron": f"Invalid cron expression {expr!r}: {len(parts)} fields given. {CRON_HELP}"}
        )
    normal = " ".join(parts)
    try:
        it = CronSim(normal, datetime(2000, 1, 1, tzinfo=UTC))
        next(it)
    except CronSimError as exc:
        raise ValidationError({"cron": f"Invalid cron expression {expr!r}: {exc}. {CRON_HELP}"}) from None
    except StopIteration:
        raise ValidationError({"cron": f"The cron expression {expr!r} never matches a date."}) from None
    return normal


def _aware(value, field):
    if value is None:
        return None
    if not isinstance(value, datetime) or dj_timezone.is_naive(value):
        raise ValidationError({field: "Must be a date and time with a time zone offset."})
    return value


# ---------------------------------------------------------------------------
# When a schedule runs


def next_run(schedule, after, *, anchor=None):
    """Return the first run time strictly after ``after`` (aware, UTC), or None.

    ``schedule`` is a Schedule or a dict of its fields. For an interval,
    ``anchor`` is the previous run time; without one runs are anchored on
    ``start_at``, and without that the first run is one interval after
    ``after``. None: the schedule has ended (``end_at``) or never matches.
    """
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
    if interval:
        step = timedelta(seconds=interval)
        last = first + math.floor((now - first) / step) * step
        runs = [last - i * step for i in range(limit)]
        return sorted(t for t in runs if t >= first)
    zone = ZoneInfo(_get(schedule, "timezone") or "UTC")
    it = CronSim(_get(schedule, "cron"), (now + timedelta(seconds=1)).astimezone(zone), reverse=True)
    runs = []
    try:
        while len(runs) < limit:
            t = next(it).astimezone(UTC)
            if t < first:
                break
            if t <= now and t not in runs:
                runs.append(t)
    except StopIteration:
        pass
    if first not in runs and len(runs) < limit:
        runs.append(first)
    return sorted(runs)


def plan(schedule, run_time, now):
    """Return ``(run times to enqueue, next run_at)`` for a schedule due at ``run_time``.

    The misfire policy decides what a late schedule (``now`` more than
    SCHEDULE_MISFIRE_GRACE seconds past ``run_time``) does: ``run_once``
    enqueues one job for all missed runs, ``skip`` enqueues none,
    ``catch_up`` one per missed run (at most SCHEDULE_CATCH_UP_MAX, the most
    recent). Then the schedule moves to its first run after ``now``.
    """
    late = (now - run_time).total_seconds() > conf.get("SCHEDULE_MISFIRE_GRACE")
    policy = _get(schedule, "misfire_policy")
    if policy == MisfirePolicy.SKIP and late:
        runs = []
    elif policy == MisfirePolicy.CATCH_UP and late:
        runs = missed_runs(schedule, run_time, now, conf.get("SCHEDULE_CATCH_UP_MAX"))
    else:
        runs = [run_time]
    return runs, next_run(schedule, now, anchor=run_time)


def describe(schedule):
    """Return a human-readable description, e.g. 'At 02:00 on Monday through Friday (Europe/Berlin)'."""
    interval = _get(schedule, "interval_seconds")
    if interval:
        return f"Every {_duration(interval)}"
    expr = _get(schedule, "cron") or ""
    try:
        text = CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC)).explain()
    except Exception:  # an invalid or unusual expression: show it as typed
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


# ---------------------------------------------------------------------------
# Changes made by people and code (admin, API)


def clean(fields, *, instance=None, now=None):
    """Validate schedule fields (a full set, or changes to ``instance``); return them normalised.

    Raise ValidationError with errors keyed by field name. The job fields
    are checked by ``lifecycle.build_job``, the one authority on jobs.
    """
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        raise TypeError(f"Unknown schedule fields: {', '.join(sorted(unknown))}")
    data = {f: getattr(instance, f) for f in EDITABLE} if instance is not None else {}
    data.update(fields)
    errors = {}

    def check(fn, *a):
        try:
            return fn(*a)
        except ValidationError as exc:
            errors.update(exc.message_dict)
            return None

    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors["name"] = ["This field is required."]
    elif len(name.strip()) > NAME_MAX:
        errors["name"] = [f"At most {NAME_MAX} characters."]
    else:
        data["name"] = name.strip()
        taken = Schedule.objects.filter(name=data["name"])
        if instance is not None:
            taken = taken.exclude(pk=instance.pk)
        if taken.exists():
            errors["name"] = [f"A schedule named {data['name']!r} already exists."]

    try:
        job = lifecycle.build_job(
            data.get("task"),
            data.get("args") if data.get("args") is not None else [],
            data.get("kwargs"),
            priority=data.get("priority"),
            queue=data.get("queue") or None,
            max_attempts=data.get("max_attempts"),
            timeout=data.get("timeout"),
            now=now,
        )
    except ValidationError as exc:
        errors.update(exc.message_dict)
        job = None
    if job is not None:
        for f in JOB_FIELDS:
            data[f] = getattr(job, f)

    cron = data.get("cron") or ""
    interval = data.get("interval_seconds")
    if cron and interval is not None:
        errors["non_field_errors"] = ["Give either a cron expression or an interval, not both."]
    elif not cron and interval is None:
        errors["non_field_errors"] = ["Give a cron expression or an interval in seconds."]
    elif cron:
        data["cron"] = check(validate_cron, cron) or cron
        data["interval_seconds"] = None
    else:
        data["cron"] = ""
        if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= INTERVAL_MAX:
            errors["interval_seconds"] = [f"Must be a whole number of seconds from 1 to {INTERVAL_MAX}."]
    data["timezone"] = data.get("timezone") or "UTC"
    check(validate_timezone, data["timezone"])
    if data.get("misfire_policy") in (None, ""):
        data["misfire_policy"] = MisfirePolicy.RUN_ONCE
    if data["misfire_policy"] not in MisfirePolicy.values:
        errors["misfire_policy"] = [f"Must be one of {', '.join(MisfirePolicy.values)}."]
    check(_aware, data.get("start_at"), "start_at")
    check(_aware, data.get("end_at"), "end_at")
    if (
        "start_at" not in errors
        and "end_at" not in errors
        and data.get("start_at")
        and data.get("end_at")
        and data["end_at"] <= data["start_at"]
    ):
        errors["end_at"] = ["Must be after start_at."]
    data["enabled"] = bool(data.get("enabled", True))
    if errors:
        raise ValidationError(errors)
    return data


def create(*, now=None, using="default", **fields):
    """Validate and save a new schedule; return it. Raise ValidationError."""
    now = now or dj_timezone.now()
    fields.setdefault("enabled", True)
    data = clean(fields, now=now)
    schedule = Schedule(**data, created_at=now, updated_at=now)
    schedule.next_run_at = next_run(schedule, now) if schedule.enabled else None
    try:
        with transaction.atomic(using=using):
            schedule.save(using=using, force_insert=True)
            lifecycle.announce_schedules([(schedule.pk, _epoch(schedule.next_run_at))], using=using)
    except IntegrityError:
        raise ValidationError({"name": [f"A schedule named {data['name']!r} already exists."]}) from None
    logger.info("schedule %s created", schedule.pk, extra={"schedule_id": schedule.pk, "action": "schedule_create"})
    return schedule


def update(schedule_id, *, now=None, using="default", **changes):
    """Change a schedule; recompute its next run when its timing or enabled flag changed.

    Return the schedule. Raise ValidationError, Schedule.DoesNotExist.
    """
    now = now or dj_timezone.now()
    with transaction.atomic(using=using):
        schedule = Schedule.objects.using(using).select_for_update().get(pk=schedule_id)
        data = clean(changes, instance=schedule, now=now)
        retime = any(data[f] != getattr(schedule, f) for f in (*TIMING_FIELDS, "enabled"))
        for f, value in data.items():
            setattr(schedule, f, value)
        if retime:
            schedule.next_run_at = next_run(schedule, now) if schedule.enabled else None
        schedule.updated_at = now
        try:
            with transaction.atomic(using=using):
                schedule.save(using=using)
        except IntegrityError:
            raise ValidationError({"name": [f"A schedule named {data['name']!r} already exists."]}) from None
        lifecycle.announce_schedules([(schedule.pk, _epoch(_live_next(schedule)))], using=using)
    return schedule


def enable(schedule_id, *, now=None, using="default"):
    """Enable a schedule from now on (runs missed while disabled are not made up)."""
    return update(schedule_id, enabled=True, now=now, using=using)


def disable(schedule_id, *, now=None, using="default"):
    return update(schedule_id, enabled=False, now=now, using=using)


def set_enabled_many(schedule_ids, enabled, *, now=None, using="default"):
    """Enable or disable many schedules; return how many changed."""
    changed = 0
    for schedule_id in schedule_ids:
        schedule = Schedule.objects.using(using).filter(pk=schedule_id).first()
        if schedule is not None and schedule.enabled != enabled:
            update(schedule_id, enabled=enabled, now=now, using=using)
            changed += 1
    return changed


def delete(schedule_id, *, using="default"):
    """Delete a schedule; its jobs stay (their ``schedule`` becomes null)."""
    with transaction.atomic(using=using):
        deleted, _ = Schedule.objects.using(using).filter(pk=schedule_id).delete()
        if not deleted:
            raise Schedule.DoesNotExist(f"Schedule {schedule_id} does not exist.")
        lifecycle.announce_schedules([(schedule_id, None)], using=using)


def run_now(schedule_id, *, created_by=None, now=None, using="default"):
    """Enqueue one job of the schedule now, outside its timetable; return the job.

    The timetable does not move: the next regular run still happens.
    """
    now = now or dj_timezone.now()
    schedule = Schedule.objects.using(using).get(pk=schedule_id)
    with transaction.atomic(using=using):
        job = _enqueue_run(schedule, now, now=now, created_by=created_by, using=using)
        Schedule.objects.using(using).filter(pk=schedule.pk).update(
            last_run_at=now, last_job=job, updated_at=now
        )
    return job


def _enqueue_run(schedule, execute_at, *, now, using, **extra):
    """Enqueue one job of ``schedule`` due at ``execute_at``; return it."""
    job, _ = lifecycle.enqueue(
        schedule.task,
        schedule.args,
        schedule.kwargs,
        queue=schedule.queue,
        priority=schedule.priority,
        max_attempts=schedule.max_attempts,
        timeout=schedule.timeout,
        execute_at=execute_at,
        schedule=schedule.pk,
        now=now,
        using=using,
        **extra,
    )
    return job


def _live_next(schedule):
    return schedule.next_run_at if schedule.enabled else None


# ---------------------------------------------------------------------------
# What the dispatcher asks


def _to_dt(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def window(until, *, using="default"):
    """Return ``[(schedule_id, next_run epoch)]`` of enabled schedules due by ``until``."""
    rows = (
        Schedule.objects.using(using)
        .filter(enabled=True, next_run_at__isnull=False, next_run_at__lte=_to_dt(until))
        .order_by("next_run_at", "id")
        .values_list("id", "next_run_at")
    )
    return [(i, at.timestamp()) for i, at in rows]


def changes(since, *, using="default"):
    """Return ``([(schedule_id, next_run epoch or None)], newest updated_at epoch or None)``."""
    rows = (
        Schedule.objects.using(using)
        .filter(updated_at__gte=_to_dt(since))
        .values_list("id", "enabled", "next_run_at", "updated_at")
    )
    entries, newest = [], None
    for i, enabled, at, updated in rows:
        entries.append((i, at.timestamp() if enabled and at is not None else None))
        stamp = updated.timestamp()
        newest = stamp if newest is None or stamp > newest else newest
    return entries, newest


def materialize_due(now, *, ids=(), using="default"):
    """Turn due schedules into jobs; return ``[(schedule_id, next_run epoch or None)]``.

    ``now`` is epoch seconds or an aware datetime. Each due schedule gets one
    compare-and-set UPDATE on the ``next_run_at`` that was read; only the
    dispatcher whose UPDATE matched enqueues the run's jobs, in the same
    transaction. The result covers every schedule looked at and every id in
    ``ids`` (current values, None when it has nothing to run or is gone).
    """
    now = _to_dt(now) if isinstance(now, (int, float)) else now
    due = list(
        Schedule.objects.using(using)
        .filter(enabled=True, next_run_at__isnull=False, next_run_at__lte=now)
        .order_by("next_run_at", "id")[:MATERIALIZE_BATCH]
    )
    result, lost = {}, set(ids)
    for schedule in due:
        if _materialize_one(schedule, now, using):
            result[schedule.pk] = _epoch(schedule.next_run_at)
        else:
            lost.add(schedule.pk)
    lost -= set(result)
    if lost:
        current = dict(
            Schedule.objects.using(using)
            .filter(pk__in=lost, enabled=True)
            .values_list("id", "next_run_at")
        )
        for schedule_id in lost:
            result[schedule_id] = _epoch(current.get(schedule_id))
    return sorted(result.items())


def _materialize_one(schedule, now, using):
    """Claim one due run of ``schedule`` by compare-and-set and enqueue it; return whether we won."""
    read = schedule.next_run_at
    try:
        runs, following = plan(schedule, read, now)
    except (CronSimError, ValueError, KeyError) as exc:
        # A row edited around the service (bad cron or zone): stop it, loudly,
        # rather than fail every dispatcher's tick on it.
        logger.error(
            "schedule %s stopped: cannot compute its next run (%s)", schedule.pk, exc,
            extra={"schedule_id": schedule.pk, "action": "schedule_error"},
        )
        runs, following = [], None
    with transaction.atomic(using=using):
        won = (
            Schedule.objects.using(using)
            .filter(pk=schedule.pk, enabled=True, next_run_at=read)
            .update(next_run_at=following, updated_at=now)
        )
        if not won:
            return False
        schedule.next_run_at = following
        last_job = None
        for run_time in runs:
            try:
                last_job = _enqueue_run(
                    schedule,
                    run_time,
                    now=now,
                    unique_key=f"schedule:{schedule.pk}:{run_time.isoformat()}",
                    using=using,
                )
            except ValidationError as exc:
                # The task was unregistered or a queue removed since the
                # schedule was saved: skip this run, keep the timetable.
                logger.error(
                    "schedule %s: run at %s not enqueued: %s", schedule.pk, run_time.isoformat(),
                    "; ".join(exc.messages), extra={"schedule_id": schedule.pk, "action": "schedule_error"},
                )
        if last_job is not None:
            Schedule.objects.using(using).filter(pk=schedule.pk).update(
                last_run_at=runs[-1], last_job=last_job
            )
        elif runs == [] and read is not None:
            logger.info(
                "schedule %s: skipped runs missed since %s (misfire policy skip)",
                schedule.pk, read.isoformat(), extra={"schedule_id": schedule.pk, "action": "schedule_skip"},
            )
        lifecycle.announce_schedules([(schedule.pk, _epoch(following))], using=using)
    return True


def upcoming(now, limit=20, *, using="default"):
    """Return the next runs of enabled schedules, soonest first (for the dashboard)."""
    return list(
        Schedule.objects.using(using)
        .filter(enabled=True, next_run_at__isnull=False)
        .order_by("next_run_at", "id")[:limit]
    )


__all__ = [
    "changes",
    "create",
    "delete",
    "describe",
    "disable",
    "enable",
    "materialize_due",
    "next_run",
    "run_now",
    "update",
    "window",
]
