"""What the job admin shows: the list's columns and the job page's fields (logs included).

Plain display methods, mixed into ``JobAdmin``; the live updates
(``live.JobLive``) render the same methods, so a refreshed cell is the
cell the page had.
"""

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html, format_html_join

from .. import conf
from ..models import JobLog, JobStatus, Schedule, Worker
from ..observability import lateness
from ..observability.stats import held_by_key
from ..sql.readable import error_entries
from ..validation import progress as progress_rule
from ..validation.fields import PROGRESS
from . import visibility
from .formatting import (
    exact_time,
    humanize_seconds,
    pretty_json,
    status_badge,
    task_short_html,
    when_html,
    worker_short_html,
    worker_state,
)

HELD = " · held by its concurrency key"
# The job page's fields that show a row of another model, that model, and the
# field a reader who may not view it sees instead (the job's own column only).
GUARDED = {
    "schedule_link": ("schedule", "schedule_plain"),
    "workflow_display": ("workflow", "workflow_plain"),
    "worker_display": ("worker", "worker_plain"),
}


def fields_for(user, names):
    """Return the field ``names`` ``user`` sees: each guarded one swapped for its plain field where it must be."""
    return [
        GUARDED[name][1] if name in GUARDED and not visibility.may_view(user, GUARDED[name][0]) else name
        for name in names
    ]


def mark_held(jobs):
    """Note on each job whether its concurrency key holds it back (one query for all of them, at most)."""
    held = held_by_key(jobs)
    for job in jobs:
        job._held_by_key = job.pk in held
    return jobs


def late_html(job, *, short=False):
    """Return when ``job`` runs ('2 min late' for a pending one) and, when it is late, why (``lateness``).

    ``short``: today's times as a time of day and the reason in a word or two,
    the whole of each on hover (the job list's one-line rows).
    """
    shown = when_html(job.execute_at, late=job.status == JobStatus.PENDING, zone=False, today=short)
    reason = lateness.late_reason(job) if job.status == JobStatus.PENDING else None
    if not reason:
        return shown
    return format_html(
        '{} <span class="sched-late-reason" data-late-reason="{}" title="{}">· {}</span>',
        shown,
        reason,
        lateness.label(reason),
        lateness.label(reason, short=short),
    )


class JobFields:
    # -- list columns -----------------------------------------------------

    @admin.display(description="task · tags", ordering="task")
    def task_name(self, obj):
        # The tags ride in the task's cell: a column of their own made the list
        # wider than 1280 px (the first two here, all of them on the job's page).
        tags = self.tags_display(obj, limit=2) if obj.tags else ""
        # A long name may break after its underscores, only where the list has no room.
        name = task_short_html(obj.task, breaks=True)
        if not tags or tags == "-":
            return name
        return format_html('{} <span class="sched-tags">{}</span>', name, tags)

    @admin.display(description="worker", ordering="worker")
    def worker_short(self, obj):
        return worker_short_html(obj.worker)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        extra = ""
        if obj.status == JobStatus.PENDING and obj.concurrency_key:
            held = getattr(obj, "_held_by_key", None)
            if held is None:
                held = obj.pk in held_by_key([obj])
            extra = HELD if held else ""
        if obj.status == JobStatus.RUNNING:
            if obj.cancel_requested:
                extra = " · cancelling"
            else:
                progress = PROGRESS.shown(obj.progress)
                if progress and progress["percent"] is not None:
                    extra = f" · {progress['percent']}%"
        return status_badge(obj.status, extra=extra)

    @admin.display(
        description=lazy(lambda: f"execute at ({timezone.get_current_timezone_name()})", str)(), ordering="execute_at"
    )
    def execute_at_display(self, obj):
        # The zone is in the column's header, once.
        return late_html(obj, short=True)

    @admin.display(description="attempts")
    def attempts_display(self, obj):
        return f"{obj.attempts}/{obj.max_attempts}"

    @admin.display(description="duration")
    def duration_display(self, obj):
        if obj.duration is not None:
            return humanize_seconds(obj.duration.total_seconds())
        if obj.status == JobStatus.RUNNING and obj.attempt_started_at:
            elapsed = (timezone.now() - obj.attempt_started_at).total_seconds()
            return format_html('<span class="sched-running-for">{} so far</span>', humanize_seconds(elapsed))
        return "–"

    # -- change page fields -------------------------------------------------

    @admin.display(description="tags")
    def tags_display(self, obj, limit=3):
        # Compact: the first ``limit``, and how many more (the job's page shows them all).
        tags = [t for t in obj.tags if isinstance(t, str)] if isinstance(obj.tags, list) else []
        shown = format_html_join(" ", '<span class="job-tag" title="{}">{}</span>', ((t, t) for t in tags[:limit]))
        more = len(tags) - limit
        return format_html('{} <span class="sched-more">+{}</span>', shown, more) if more > 0 else shown or "-"

    @admin.display(description="tags")
    def all_tags_display(self, obj):
        tags = [t for t in obj.tags if isinstance(t, str)] if isinstance(obj.tags, list) else []
        return format_html_join(" ", '<span class="job-tag">{}</span>', ((t,) for t in tags)) or "-"

    @admin.display(description="meta")
    def meta_display(self, obj):
        return pretty_json(obj.meta) if obj.meta else "-"

    @admin.display(description="args")
    def args_display(self, obj):
        return pretty_json(conf.filtered(obj.args))

    @admin.display(description="kwargs")
    def kwargs_display(self, obj):
        return pretty_json(conf.filtered(obj.kwargs))

    @admin.display(description="when")
    def due_display(self, obj):
        return late_html(obj)

    @admin.display(description="created at")
    def created_at_display(self, obj):
        return when_html(obj.created_at)

    @admin.display(description="started at")
    def started_at_display(self, obj):
        return when_html(obj.started_at)

    @admin.display(description="last attempt at")
    def last_attempted_at_display(self, obj):
        return when_html(obj.attempt_started_at)

    @admin.display(description="finished at")
    def finished_at_display(self, obj):
        return when_html(obj.finished_at)

    @admin.display(description="expires at")
    def expires_at_display(self, obj):
        return when_html(obj.expires_at) if obj.expires_at is not None else "–"

    @admin.display(description="lease expires at")
    def lease_display(self, obj):
        if obj.status != JobStatus.RUNNING:
            return "–"
        if obj.lease_expires_at is None:  # handed back at shutdown (lifecycle.release)
            return "none: handed back at shutdown, it runs again once its dispatcher's process is gone"
        return when_html(obj.lease_expires_at)

    @admin.display(description="schedule")
    def schedule_link(self, obj):
        if obj.schedule_id is None:
            return "–"
        schedule = Schedule.objects.filter(pk=obj.schedule_id).only("name").first()
        if schedule is None:
            return f"#{obj.schedule_id}"
        url = reverse("admin:scheduler_app_schedule_change", args=[schedule.pk])
        return format_html('<a href="{}">{}</a>', url, schedule.name)

    @admin.display(description="schedule")
    def schedule_plain(self, obj):
        return "–" if obj.schedule_id is None else f"#{obj.schedule_id}"

    @admin.display(description="workflow")
    def workflow_plain(self, obj):
        return "–" if obj.workflow_id is None else f"#{obj.workflow_id}"

    @admin.display(description="worker")
    def worker_plain(self, obj):
        return obj.worker or "–"

    @admin.display(description="worker")
    def worker_display(self, obj):
        if not obj.worker:
            return "–"
        worker = Worker.objects.filter(pk=obj.worker).first()
        if worker is None:
            return obj.worker
        url = reverse("admin:scheduler_app_worker_change", args=[worker.pk])
        state = worker_state(worker)
        return format_html(
            '<a href="{}">{}</a> <span class="sched-badge sched-worker-{}">{}</span>', url, worker.pk, state, state
        )

    @admin.display(description="progress")
    def progress_display(self, obj):
        p = progress_rule.shown(obj.progress)
        if p is None:
            return "–"
        return format_html('<progress max="100" value="{}"></progress> {}', p["percent"] or 0, p["text"])

    @admin.display(description="result")
    def result_display(self, obj):
        if obj.status != JobStatus.SUCCEEDED:
            return "–"
        return pretty_json(obj.result)

    @admin.display(description="cancel requested")
    def cancel_requested_display(self, obj):
        if not obj.cancel_requested:
            return "–"
        if obj.status == JobStatus.RUNNING:
            return "Yes: the task was asked to stop at its next check."
        return "Yes"

    @admin.display(description="errors")
    def errors_display(self, obj):
        """Each attempt's error, newest first: one line (exception and message), the traceback under it (the newest open)."""
        entries = error_entries(obj.errors)  # any shape a row holds
        if not entries:
            return "None"
        rows = format_html_join(
            "",
            '<details class="sched-error" data-key="error-{}"{}><summary><strong>Attempt {}</strong> · <code>{}</code>: {}'
            '<span class="sched-error-meta"> · {} · worker {}</span></summary><pre>{}</pre></details>',
            (
                (
                    i,
                    " open" if i == len(entries) - 1 else "",
                    "?" if e["attempt"] is None else e["attempt"],
                    e["exception_class"],
                    e["message"],
                    error_time(e["time"]),
                    e["worker"] or "–",
                    e["traceback"] or "(no traceback)",
                )
                for i, e in reversed(list(enumerate(entries)))
            ),
        )
        return format_html('<div class="sched-errors">{}</div>', rows)

    @admin.display(description="logs")
    def logs_display(self, obj):
        """Each attempt's log records, newest attempt and newest record first, coloured by level."""
        if not obj.logs_count:
            return format_html(
                '<p class="sched-empty-inline">{}</p>', "No log records kept (the task's own INFO and above are)."
            )
        records = list(
            JobLog.objects.filter(job_id=obj.pk)
            .order_by("-attempt", "-seq")
            .values("attempt", "time", "level", "logger", "message", "exc_text")[:LOGS_SHOWN]
        )
        attempts = {}
        for r in records:
            attempts.setdefault(r["attempt"], []).append(r)
        parts = []
        for attempt, rows in attempts.items():
            lines = format_html_join(
                "",
                '<li class="sched-log sched-log-{}"><span class="sched-log-meta"><time datetime="{}">{}</time> '
                '<span class="sched-level">{}</span> <span class="sched-logger">{}</span></span> '
                '<span class="sched-log-msg">{}</span>{}</li>',
                (
                    (
                        level_class(r["level"]),
                        r["time"].isoformat() if r["time"] else "",
                        exact_time(r["time"]),
                        level_name(r["level"]),
                        r["logger"],
                        r["message"],
                        format_html("<pre>{}</pre>", r["exc_text"]) if r["exc_text"] else "",
                    )
                    for r in rows
                ),
            )
            parts.append(
                format_html(
                    '<details class="sched-logs-attempt" data-key="logs-{}"{}><summary>Attempt {} · {} {}</summary><ol class="sched-logs">{}</ol></details>',
                    attempt,
                    " open" if not parts else "",
                    attempt,
                    len(rows),
                    "record" if len(rows) == 1 else "records",
                    lines,
                )
            )
        more = ""
        if obj.logs_count > len(records):
            more = format_html(
                '<p class="help">The newest {} of {} records are shown; GET /api/jobs/{}/logs/ has them all.</p>',
                len(records),
                obj.logs_count,
                obj.pk,
            )
        return format_html(
            '<div class="sched-logbook">{}{}</div>', format_html_join("", "{}", ((p,) for p in parts)), more
        )


# Records shown on the job page (the API pages through all of them).
LOGS_SHOWN = 500
LEVELS = {10: "debug", 20: "info", 30: "warning", 40: "error", 50: "critical"}


def level_class(level):
    return LEVELS.get(level // 10 * 10, "info") if level < 50 else "critical"


def level_name(level):
    import logging

    return logging.getLevelName(level)


def error_time(text):
    """Return an error entry's ISO time in the admin's format (the text itself if it is not one)."""
    from django.utils.dateparse import parse_datetime

    try:
        moment = parse_datetime(text or "")
    except ValueError:
        moment = None
    return exact_time(moment) if moment is not None and moment.tzinfo is not None else (text or "")
