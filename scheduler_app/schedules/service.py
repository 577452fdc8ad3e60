"""Changes people and code make to schedules: create, update, enable, disable, delete, run now.

The admin and the API call these; ``clean`` is the one authority on a valid
schedule (its job fields are checked by the lifecycle's rules, through
``build_job``). Every change announces the schedule's next run to the
dispatchers on commit.
"""

import logging

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone as dj_timezone

from .. import lifecycle
from ..models import MisfirePolicy, Schedule
from ..validation.errors import Errors
from ..validation.schedules import (
    CRON,
    EDITABLE,
    END_AT,
    INTERVAL,
    JOB_FIELDS,
    MISFIRE_POLICY,
    NAME,
    PAST_LATEST,
    START_AT,
    TIMEZONE,
    TIMING_FIELDS,
)
from .timetable import BeyondLatest, next_run

logger = logging.getLogger(__name__)


def _epoch(value):
    return value.timestamp() if value is not None else None


def clean(fields, *, instance=None, now=None):
    """Validate schedule fields (a full set, or changes to ``instance``); return them normalised.

    Raise ValidationError with errors keyed by field name. The job fields
    are checked by the lifecycle's rules (``build_job``), the schedule's by
    ``validation.schedules``; every field's error is reported at once (``Errors``).
    """
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        raise TypeError(f"Unknown schedule fields: {', '.join(sorted(unknown))}")
    data = {f: getattr(instance, f) for f in EDITABLE} if instance is not None else {}
    data.update(fields)
    errors = Errors()
    _clean_name(errors, data, instance)
    _clean_job(errors, data, now)
    _clean_timing(errors, data, now)
    data["enabled"] = bool(data.get("enabled", True))
    errors.raise_if_any()
    return data


def _clean_name(errors, data, instance):
    name = errors.run(NAME, data.get("name"))
    if name is None:
        return
    data["name"] = name
    taken = Schedule.objects.filter(name=name)
    if instance is not None:
        taken = taken.exclude(pk=instance.pk)
    if taken.exists():
        errors.add("name", f"A schedule named {name!r} already exists.")


def _clean_job(errors, data, now):
    """Check the job the schedule makes as ``build_job`` checks any job; normalise its fields."""
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
        errors.merge(exc, "task")
        return
    for f in JOB_FIELDS:
        data[f] = getattr(job, f)


def _clean_timing(errors, data, now):
    """Check when the schedule runs: a cron expression or an interval, its zone, its window, its next run."""
    cron = data.get("cron") or ""
    interval = data.get("interval_seconds")
    if cron and interval is not None:
        errors.add("non_field_errors", "Give either a cron expression or an interval, not both.")
    elif not cron and interval is None:
        errors.add("non_field_errors", "Give a cron expression or an interval in seconds.")
    elif cron:
        data["cron"] = errors.run(CRON, cron) or cron
        data["interval_seconds"] = None
    else:
        data["cron"] = ""
        checked = errors.run(INTERVAL, interval)  # "5m" is stored as 300
        if checked is not None:
            data["interval_seconds"] = checked
    data["timezone"] = data.get("timezone") or "UTC"
    errors.run(TIMEZONE, data["timezone"])
    if data.get("misfire_policy") in (None, ""):
        data["misfire_policy"] = MisfirePolicy.RUN_ONCE
    errors.run(MISFIRE_POLICY, data["misfire_policy"])
    for rule in (START_AT, END_AT):
        if data.get(rule.field) is not None:
            data[rule.field] = errors.run(rule, data[rule.field]) or data[rule.field]
    found = set(errors.errors)
    if not {"start_at", "end_at"} & found and data.get("start_at") and data.get("end_at"):
        if data["end_at"] <= data["start_at"]:
            errors.add("end_at", "Must be after start_at.")
    if not {*TIMING_FIELDS, "non_field_errors"} & set(errors.errors):
        try:
            next_run(data, now or dj_timezone.now(), strict=True)
        except BeyondLatest:
            # Refused even when disabled: enabling it later could not compute it either.
            field = "start_at" if data.get("start_at") else "cron" if cron else "interval_seconds"
            errors.add(field, PAST_LATEST)


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
        Schedule.objects.using(using).filter(pk=schedule.pk).update(last_run_at=now, last_job=job, updated_at=now)
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
