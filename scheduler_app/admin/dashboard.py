"""The live dashboard: an admin page, its JSON feed, and queue pause/resume.

Mounted by the admin of the ``Dashboard`` proxy model, so it lives at
``/admin/scheduler_app/dashboard/`` and is listed in the Scheduler app like
any model (first, by name). Numbers and rows come from
``scheduler_app.observability.stats``; this module only formats them. Queue changes go
through ``lifecycle``.

The page and the JSON feed render the same section templates: the JSON
carries the numbers and each section's HTML, and dashboard.js swaps the
sections in place every few seconds (no reload, scroll kept).
"""

import time
from functools import partial

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_POST

from .. import lifecycle, schedules
from ..models import Dashboard, JobStatus, Schedule
from ..observability import history, lateness, stats
from ..observability import workflows as workflow_numbers
from ..sql import readable
from ..validation import progress as progress_rule
from . import runtimes, tokens, visibility
from .audit import audit
from .base import ReadOnlyModelAdmin
from .changelist import site_view
from .formatting import (
    clock,
    humanize_seconds,
    relative_time,
    slots_text,
    task_short_html,
    when_html,
    worker_short,
    worker_short_html,
    worker_state,
)

UPCOMING_LIMIT = 20
RUNNING_LIMIT = 50
FAILURES_LIMIT = 10
WORKERS_LIMIT = 50
REFRESH_SECONDS = 3
SECTIONS = ["summary", "queues", "tasks", "upcoming", "running", "failures", "workers"]
# The models whose rows the dashboard shows, and what shows them: a reader
# sees each only with its view permission (``visibility``), as the model's
# own list and its API would answer. The counts, the history and the per-task
# numbers are the dashboard's own (its view permission).
PANELS = {
    "job": ("running", "failures", "upcoming"),  # jobs one by one
    "schedule": ("upcoming",),  # schedules' next runs, among the upcoming rows
    "queue": ("queues", "upcoming_paused"),
    "worker": ("workers", "workers_alive"),
    "workflow": ("workflows",),
}
EVERYTHING = frozenset(PANELS)
# The history's ranges (minutes): 1 h, 24 h, 7 d.
RANGES = {60: "1 h", 1440: "24 h", 10080: "7 d"}
# view_job is what the dashboard asked for before it had a permission of its own.
VIEW_PERMISSIONS = ("scheduler_app.view_dashboard", "scheduler_app.view_job")
QUEUE_PERMISSION = "scheduler_app.change_queue"


# ---------------------------------------------------------------------------
# Rows: stats' model instances as template- and JSON-friendly dicts


def task_row(obj, **fields):
    """Return the keys every job or schedule row has (id, task, queue, link), plus ``fields``."""
    module, _, name = obj.task.rpartition(".")
    opts = obj._meta
    return {
        "id": obj.pk,
        "task": obj.task,
        "task_module": module,
        "task_name": name,
        "task_html": task_short_html(obj.task),
        "queue": obj.queue,
        **fields,
        "url": reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]),
    }


def upcoming_row(item, now, paused):
    """Return a pending job, or a schedule's next run (``schedule: True``), as a row."""
    if isinstance(item, Schedule):
        at = item.next_run_at
        extra = {"schedule": True, "name": item.name, "description": schedules.describe(item)}
    else:
        at = item.execute_at
        extra = {"attempt": f"{item.attempts}/{item.max_attempts}"}
    reason = None if isinstance(item, Schedule) else lateness.late_reason(item, now)
    return task_row(
        item,
        priority=item.priority,
        # None: SQLite text that is no time (readable.py); the dispatcher takes it as due.
        execute_at=at.isoformat() if at is not None else None,
        due=at is None or at <= now,
        when=relative_time(at, now, late=True) if at is not None else "–",
        when_html=when_html(at, now, late=True),
        paused=item.queue in paused,
        late_reason=reason,
        late_label=lateness.label(reason),
        **extra,
    )


def running_row(job, now):
    # Elapsed: this attempt's, not the first attempt's (started_at).
    attempt_started = job.attempt_started_at
    elapsed = (now - attempt_started).total_seconds() if attempt_started else None
    progress = progress_rule.shown(job.progress)
    return task_row(
        job,
        worker=job.worker,
        worker_html=worker_short_html(job.worker),
        attempt=f"{job.attempts}/{job.max_attempts}",
        started_at=attempt_started.isoformat() if attempt_started else None,
        elapsed_seconds=round(elapsed, 1) if elapsed is not None else None,
        elapsed=humanize_seconds(elapsed) if elapsed is not None else "–",
        progress=progress,
        percent=progress["percent"] if progress else None,
        cancel_requested=job.cancel_requested,
    )


def last_error_message(job):
    entries = readable.error_entries(job.errors)
    if not entries:
        return "", ""
    return entries[-1]["exception_class"], entries[-1]["message"]


def failure_row(job, now):
    exception_class, message = last_error_message(job)
    return task_row(
        job,
        attempts=job.attempts,
        finished_at=job.finished_at.isoformat() if job.finished_at else None,
        ago=relative_time(job.finished_at, now) if job.finished_at else "–",
        when_html=when_html(job.finished_at, now),
        exception_class=exception_class.rpartition(".")[2],
        message=message,
    )


def worker_row(worker, now):
    slots = stats.worker_slots(worker)
    age = (now - worker.last_heartbeat).total_seconds() if worker.last_heartbeat is not None else None
    return {
        "id": worker.id,
        "hostname": worker.hostname,
        "pid": worker.pid,
        "queues": readable.worker_queues(worker.queues),
        "slots": slots,
        "slots_text": slots_text(readable.worker_slots(worker.slots), readable.worker_queues(worker.queues)),
        "shared": "*" in readable.worker_slots(worker.slots),
        "short_id": worker_short(worker.id),
        "state": worker_state(worker, now),
        "heartbeat_age_seconds": round(age, 1) if age is not None else None,
        "heartbeat_age": humanize_seconds(age) if age is not None else "–",
        "running": worker.running,
        "processed": worker.processed,
        "failed": worker.failed,
        "url": reverse("admin:scheduler_app_worker_change", args=[worker.id]),
    }


def minutes_of(request):
    """Return the history range the request asks for (``?minutes=``), one of RANGES (default an hour)."""
    raw = request.GET.get("minutes", "")
    return int(raw) if raw.isdigit() and int(raw) in RANGES else 60


def task_rows(minutes, now):
    rows = history.per_task(minutes, now=now)
    for row in rows:
        row["task_html"] = task_short_html(row["task"])
        row["p50_text"] = humanize_seconds(row["p50"]) if row["p50"] is not None else "–"
        row["p95_text"] = humanize_seconds(row["p95"]) if row["p95"] is not None else "–"
        row["rate_text"] = f"{row['failure_rate'] * 100:.1f} %"
        row["last_failure_html"] = when_html(row["last_failure"], now) if row["last_failure"] else "–"
    return rows


def dashboard_data(now=None, minutes=60, shown=EVERYTHING):
    """Return what the dashboard shows, as template- and JSON-friendly values.

    ``shown``: the models (``PANELS``' keys) whose rows the reader may see;
    the parts of the others are neither read nor returned.
    """
    now = now or timezone.now()
    counts = stats.job_counts()
    queues = stats.queues(now)
    for q in queues:
        q["lag"] = humanize_seconds(q["oldest_due_lag_seconds"]) if q["due"] else "–"
    data = {
        "generated_at": now.isoformat(),
        "counts": counts,
        "status_cards": [{"status": s, "label": JobStatus(s).label, "count": counts[s]} for s in JobStatus.values],
        "total": sum(counts.values()),
        "due_now": sum(q["due"] for q in queues),
        "throughput": stats.throughput(now),
        "history": history.series(minutes, now=now),
        "minutes": minutes,
        "tasks": task_rows(minutes, now),
        "shown": sorted(shown),
    }
    lag = stats.oldest_due_lag(now)
    data |= {"oldest_due_lag_seconds": lag, "oldest_due_lag": humanize_seconds(lag) if lag else "–"}
    data |= _late_and_upcoming(now, queues, shown)
    if "job" in shown:
        running = [running_row(job, now) for job in stats.running_jobs(RUNNING_LIMIT)]
        data["running"] = running
        data["running_more"] = max(counts[JobStatus.RUNNING] - len(running), 0)
        data["failures"] = [failure_row(job, now) for job in stats.recent_failures(FAILURES_LIMIT)]
    if "queue" in shown:
        data["queues"] = queues
        data["upcoming_paused"] = [
            {"name": q["name"], "pending": q["pending"]} for q in queues if q["paused"] and q["pending"]
        ]
    if "worker" in shown:
        workers = [worker_row(w, now) for w in stats.recent_workers(now, WORKERS_LIMIT)]
        data["workers"] = workers
        data["workers_alive"] = sum(1 for w in workers if w["state"] == "alive")
    if "workflow" in shown:
        data["workflows"] = workflow_numbers.dashboard_counts()
    # Floats of rows written around the service may be NaN or infinite: JSON (the
    # feed, the charts' json_script) has no words for them.
    return readable.finite(data)


def _late_and_upcoming(now, queues, shown):
    """Return the late jobs' tally by reason and, for a reader who may see jobs or schedules, the upcoming rows."""
    paused = {q["name"] for q in queues if q["paused"]}
    # Why late jobs wait: the queues' counts and the upcoming rows from one read (none when nothing is late).
    late_per_queue = {q["name"]: q["late"] for q in queues if q["late"]}
    items = []
    if shown & {"job", "schedule"}:
        # Ranked by what will run: a paused queue's jobs are left out (and counted).
        items = stats.upcoming(now, UPCOMING_LIMIT, skip_queues=paused, jobs="job" in shown, runs="schedule" in shown)
    jobs = [item for item in items if not isinstance(item, Schedule)]
    waiting_queues = set(late_per_queue) | {job.queue for job in jobs if lateness.is_late(job, now)}
    reasons = lateness.queue_reasons(waiting_queues, now) if waiting_queues else {}
    late = lateness.tally(late_per_queue, reasons)
    found = {
        # Late pending jobs by why they wait (lateness.REASONS' order).
        "late": [{"reason": r, "label": lateness.label(r), "count": n} for r, n in late.items()],
        "late_total": sum(late.values()),
    }
    if shown & {"job", "schedule"}:
        lateness.attach(jobs, now, reasons=reasons)
        found["upcoming"] = [upcoming_row(item, now, paused) for item in items]
    return found


def sections_of(shown):
    """Return the dashboard's sections a reader who may view the models ``shown`` sees, in order."""
    hidden = {part for model, parts in PANELS.items() if model not in shown for part in parts}
    hidden -= {part for model in shown for part in PANELS[model]}  # upcoming: jobs or schedules' runs
    return [name for name in SECTIONS if name not in hidden]


# The toolbar's links: (label, admin URL name, the model the reader must view; None: the add permission of jobs).
LINKS = [
    ("All jobs", "job_changelist", "job"),
    ("Task run times", "dashboard_runtimes", "dashboard"),
    ("Queues", "queue_changelist", "queue"),
    ("Schedule a job", "job_add", None),
    ("Workers", "worker_changelist", "worker"),
    ("My API token", "my_token", "staff"),
]


def links(user, site_name):
    """Return the toolbar's links ``user`` may follow."""
    return [
        {"label": label, "url": reverse(f"admin:scheduler_app_{name}", current_app=site_name)}
        for label, name, model in LINKS
        if _may_follow(user, model)
    ]


def _may_follow(user, model):
    if model is None:
        return user.has_perm("scheduler_app.add_job")
    # The run times are the dashboard's own numbers: whoever sees it sees them;
    # a token is every staff user's own.
    return model in ("dashboard", "staff") or visibility.may_view(user, model)


def render_sections(request, data):
    """Return ``{section: html}`` of the sections the data holds, rendered by the same templates as the page."""
    context = {**data, "can_pause": request.user.has_perm(QUEUE_PERMISSION)}
    return {
        name: render_to_string(f"scheduler_app/dashboard/_{name}.html", context, request=request)
        for name in sections_of(set(data["shown"]))
    }


# ---------------------------------------------------------------------------
# The admin: a page, a JSON feed and a POST per queue; nothing to add, change or delete


@admin.register(Dashboard)
class DashboardAdmin(ReadOnlyModelAdmin):
    def get_urls(self):
        wrap = partial(site_view, self)

        app, model = self.opts.app_label, self.opts.model_name
        return [
            path("", wrap(self.changelist_view), name=f"{app}_{model}"),
            # The same page under the name the admin index links models by.
            path("", wrap(self.changelist_view), name=f"{app}_{model}_changelist"),
            path("data/", wrap(self.data_view), name=f"{app}_{model}_data"),
            path("runtimes/", wrap(self.runtimes_view), name=f"{app}_{model}_runtimes"),
            # Any staff user's own API token (the site's staff check only: their own, as a password).
            path("token/", wrap(partial(tokens.token_view, self)), name=f"{app}_my_token"),
            path("queues/<str:name>/<str:action>/", wrap(self.queue_toggle_view), name=f"{app}_queue_toggle"),
        ]

    def has_view_permission(self, request, obj=None):
        return any(request.user.has_perm(perm) for perm in VIEW_PERMISSIONS)

    def _require_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied

    def changelist_view(self, request, extra_context=None):
        """Render the dashboard page."""
        self._require_view(request)
        now = timezone.now()
        data = dashboard_data(now, minutes_of(request), visibility.viewable(request.user, PANELS))
        context = {
            **self.admin_site.each_context(request),
            "title": "Scheduler dashboard",
            "subtitle": None,
            "sections": render_sections(request, data),
            "links": links(request.user, self.admin_site.name),
            "data_url": reverse("admin:scheduler_app_dashboard_data", current_app=self.admin_site.name),
            "refresh_ms": REFRESH_SECONDS * 1000,
            "refresh_seconds": REFRESH_SECONDS,
            "generated_at": data["generated_at"],
            "generated_time": clock(now),
            "history": data["history"],
            "ranges": RANGES,
            "minutes": data["minutes"],
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/scheduler_app/dashboard.html", context)

    def runtimes_view(self, request):
        """Render the per-task run time charts (p50 and p95 over time)."""
        self._require_view(request)
        minutes = minutes_of(request)
        task = request.GET.get("task", "")[:255]
        context = {
            **self.admin_site.each_context(request),
            "title": "Task run times",
            "subtitle": None,
            "ranges": RANGES,
            "minutes": minutes,
            "task": task,
            **runtimes.runtimes(minutes, task=task or None),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/scheduler_app/runtimes.html", context)

    def data_view(self, request):
        """Return the dashboard's numbers and each section's HTML as JSON.

        ``took_ms`` tells the page how long this took; it polls less often when
        the numbers are expensive (a huge table), so open dashboards never keep
        the database busy.
        """
        self._require_view(request)
        started = time.monotonic()
        data = dashboard_data(minutes=minutes_of(request), shown=visibility.viewable(request.user, PANELS))
        html = render_sections(request, data)
        return JsonResponse({**data, "html": html, "took_ms": round((time.monotonic() - started) * 1000)})

    @method_decorator(require_POST)
    def queue_toggle_view(self, request, name, action):
        """Pause or resume a queue through the lifecycle; JSON for fetch(), else redirect."""
        if action not in ("pause", "resume"):
            raise Http404("Unknown queue action.")
        if not request.user.has_perm(QUEUE_PERMISSION):
            raise PermissionDenied
        wants_json = "application/json" in request.headers.get("Accept", "")
        dashboard = reverse("admin:scheduler_app_dashboard", current_app=self.admin_site.name)
        if request.POST.get("next") == "queues":
            dashboard = reverse("admin:scheduler_app_queue_changelist", current_app=self.admin_site.name)
        try:
            with transaction.atomic():
                (lifecycle.pause_queue if action == "pause" else lifecycle.resume_queue)(name)
                audit(request, action, "queue", object_id=name)
        except ValidationError as exc:
            error = "; ".join(exc.messages)
            if wants_json:
                return JsonResponse({"error": error}, status=400)
            messages.error(request, error)
            return HttpResponseRedirect(dashboard)
        text = (
            f"Queue “{name}” paused: its pending jobs wait (running ones finish) until it resumes."
            if action == "pause"
            else f"Queue “{name}” resumed: its due jobs start as slots free up."
        )
        if wants_json:
            return JsonResponse({"queue": name, "paused": action == "pause", "message": text})
        messages.success(request, text)
        return HttpResponseRedirect(dashboard)
