"""What the dispatcher asks of schedules: the window, changes, and materialising due runs.

A schedule runs exactly once per run time, however many dispatchers share
the database: the dispatcher that moves ``next_run_at`` forward with one
compare-and-set UPDATE (``WHERE id = ... AND next_run_at = <the value read>``)
is the only one that enqueues the run's job, in the same transaction. The
job's ``unique_key`` (``schedule:<id>:<run time>``) is a second guard.
"""

import logging
from datetime import UTC, datetime

from cronsim import CronSimError
from django.core.exceptions import ValidationError
from django.db import transaction

from .. import lifecycle, sql
from ..models import Schedule
from .service import _enqueue_run, _epoch
from .timetable import plan

logger = logging.getLogger(__name__)

# Schedules the dispatcher materialises per call; the rest wait for the next.
MATERIALIZE_BATCH = 100


def _to_dt(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def window(until, *, using="default"):
    """Return ``[(schedule_id, next_run epoch)]`` of enabled schedules due by ``until``."""
    rows = (
        Schedule.objects.using(using)
        .filter(enabled=True, next_run_at__isnull=False, next_run_at__lte=_to_dt(until))
        .order_by("next_run_at", "id")
        .annotate(at=sql.Epoch("next_run_at"))
        .values_list("id", "at")
    )
    return [(i, at) for i, at in rows if at is not None]


def changes(since, *, using="default"):
    """Return ``[(schedule_id, next_run epoch or None)]`` of the schedules changed since ``since``."""
    rows = (
        Schedule.objects.using(using)
        .filter(updated_at__gte=_to_dt(since))
        .annotate(at=sql.Epoch("next_run_at"))
        .values_list("id", "enabled", "at")
    )
    return [(i, at if enabled else None) for i, enabled, at in rows]


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
        current = dict(Schedule.objects.using(using).filter(pk__in=lost, enabled=True).values_list("id", "next_run_at"))
        for schedule_id in lost:
            result[schedule_id] = _epoch(current.get(schedule_id))
    return sorted(result.items())


def _materialize_one(schedule, now, using):
    """Claim one due run of ``schedule`` by compare-and-set and enqueue it; return whether we won."""
    read = schedule.next_run_at
    try:
        runs, following = plan(schedule, read, now)
    except (CronSimError, ValueError, KeyError, OverflowError) as exc:
        # A row edited around the service (bad cron or zone): stop it, loudly,
        # rather than fail every dispatcher's tick on it.
        logger.error(
            "schedule %s stopped: cannot compute its next run (%s)",
            schedule.pk,
            exc,
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
                    "schedule %s: run at %s not enqueued: %s",
                    schedule.pk,
                    run_time.isoformat(),
                    "; ".join(exc.messages),
                    extra={"schedule_id": schedule.pk, "action": "schedule_error"},
                )
        if last_job is not None:
            Schedule.objects.using(using).filter(pk=schedule.pk).update(last_run_at=runs[-1], last_job=last_job)
        elif runs == [] and read is not None:
            logger.info(
                "schedule %s: skipped runs missed since %s (misfire policy skip)",
                schedule.pk,
                read.isoformat(),
                extra={"schedule_id": schedule.pk, "action": "schedule_skip"},
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
