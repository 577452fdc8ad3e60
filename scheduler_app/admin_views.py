"""The live dashboard: an admin page, its JSON feed, and queue pause/resume.

Mounted on the admin site by :func:`install` at ``/admin/scheduler_app/dashboard/``
(and listed first in the Scheduler app on the admin index). Numbers come from
``scheduler_app.stats``; queue changes go through ``lifecycle``.

The page and the JSON feed render the same section templates: the JSON
carries the numbers and each section's HTML, and dashboard.js swaps the
sections in place every few seconds (no reload, scroll kept).
"""

import time
from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from . import lifecycle, schedules, stats
from .models import Job, JobStatus, Worker, stale_before

UPCOMING_LIMIT = 20
RUNNING_LIMIT = 50
FAILURES_LIMIT = 10
WORKERS_LIMIT = 50
REFRESH_SECONDS = 3
SECTIONS = ["summary", "queues", "chart", "upcoming", "running", "failures", "workers"]
VIEW_PERMISSION = "scheduler_app.view_job"
QUEUE_PERMISSION = "scheduler_app.change_queue"


# ---------------------------------------------------------------------------
# Formatting (the admin's list columns use these too)


def humanize_seconds(seconds):
    """Return a short duration: '850 ms', '12 s', '5 min', '3 h 4 min', '2 d 3 h'."""
    seconds = abs(float(seconds))
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{int(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def relative_time(when, now=None, *, late=False):
    """Return 'in 5 min', or for a past time '3 min late' (``late``) / '3 min ago'."""
    now = now or timezone.now()
    delta = (when - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    text = humanize_seconds(delta)
    if delta > 0:
        return f"in {text}"
    return f"{text} late" if late else f"{text} ago"


def worker_state(worker, now=None):
    """Return 'alive', 'stopped' or 'dead' (alive in the table but silent too long)."""
    if worker.state == "alive" and worker.last_heartbeat >= stale_before(now):
        return "alive"
    return "stopped" if worker.state == "stopped" else "dead"


def last_error_message(job):
    if not job.errors:
        return "", ""
    last = job.errors[-1]
    return last.get("exception_class", ""), last.get("message", "")


# ---------------------------------------------------------------------------
# Data


def upcoming_jobs(now, limit=UPCOMING_LIMIT):
    """Return the next pending jobs in the order they will run.

    Due jobs first, in claim order (priority desc, execute_at, id); then
    future jobs by execute_at, id. Each half is served by a partial pending
    index. Jobs of paused queues are listed (flagged), since they keep
    their place once the queue resumes. With several queues the dispatcher
    claims per queue, so across queues this order is the global intent,
    not a promise.
    """
    fields = ["id", "task", "queue", "priority", "execute_at", "attempts", "max_attempts"]
    due = list(Job.objects.due(now).in_claim_order().only(*fields)[:limit])
    future = list(
        Job.objects.pending().filter(execute_at__gt=now).order_by("execute_at", "id").only(*fields)[: limit - len(due)]
    ) if len(due) < limit else []
    return due + future


def with_schedule_runs(upcoming, now, paused, limit=UPCOMING_LIMIT):
    """Return ``upcoming`` jobs with the next runs of enabled schedules merged in.

    Due jobs keep their claim order at the top; future jobs and schedule runs
    follow by time. Schedule rows carry ``schedule: True``.
    """
    runs = [
        {
            "schedule": True,
            "id": s.pk,
            "name": s.name,
            "task": s.task,
            "task_module": s.task.rpartition(".")[0],
            "task_name": s.task.rpartition(".")[2],
            "queue": s.queue,
            "priority": s.priority,
            "execute_at": s.next_run_at.isoformat(),
            "due": s.next_run_at <= now,
            "when": relative_time(s.next_run_at, now, late=True),
            "paused": s.queue in paused,
            "description": schedules.describe(s),
            "url": reverse("admin:scheduler_app_schedule_change", args=[s.pk]),
            "_at": s.next_run_at,
        }
        for s in schedules.upcoming(now, limit)
    ]
    if not runs:
        return upcoming
    due = [u for u in upcoming if u["due"]]
    later = [u for u in upcoming if not u["due"]]
    later = sorted(later + runs, key=lambda u: u.get("_at") or parse_datetime(u["execute_at"]))
    merged = (due + later)[:limit]
    for u in merged:
        u.pop("_at", None)
    return merged


def throughput_chart(series, *, width=720, height=160):
    """Return the geometry of a stacked bar chart (succeeded under failed) per minute."""
    top = 14
    bottom = 20
    left = 34
    plot_h = height - top - bottom
    n = max(len(series), 1)
    step = (width - left - 4) / n
    peak = max([s["succeeded"] + s["failed"] for s in series] + [1])
    # A round axis maximum: 1, 2, 5, 10, 20, 50 ...
    scale = next(v for v in _nice_steps() if v >= peak)
    bars = []
    for i, s in enumerate(series):
        x = left + i * step + 1
        ok_h = plot_h * s["succeeded"] / scale
        fail_h = plot_h * s["failed"] / scale
        minute = timezone.localtime(_parse(s["minute"])).strftime("%H:%M")
        bars.append(
            {
                "x": round(x, 2),
                "w": round(max(step - 2, 1), 2),
                "ok_y": round(top + plot_h - ok_h, 2),
                "ok_h": round(ok_h, 2),
                "fail_y": round(top + plot_h - ok_h - fail_h, 2),
                "fail_h": round(fail_h, 2),
                "succeeded": s["succeeded"],
                "failed": s["failed"],
                "minute": minute,
            }
        )
    ticks = [
        {"x": b["x"], "label": b["minute"]} for i, b in enumerate(bars) if i % 10 == 0 or i == len(bars) - 1
    ]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "base_y": top + plot_h,
        "plot_h": plot_h,
        "mid_y": top + plot_h / 2,
        "max": scale,
        "half": scale / 2 if scale % 2 else scale // 2,
        "bars": bars,
        "ticks": ticks,
        "label_y": height - 5,
        "total_succeeded": sum(s["succeeded"] for s in series),
        "total_failed": sum(s["failed"] for s in series),
    }


def _nice_steps():
    v = 1
    while True:
        for m in (1, 2, 5):
            yield v * m
        v *= 10


def _parse(iso):
    return parse_datetime(iso)


def dashboard_data(now=None):
    """Return everything the dashboard shows, as template- and JSON-friendly values."""
    now = now or timezone.now()
    counts = stats.job_counts()
    queues = stats.queues(now)
    paused = {q["name"] for q in queues if q["paused"]}
    for q in queues:
        q["lag"] = humanize_seconds(q["oldest_due_lag_seconds"]) if q["due"] else "–"

    upcoming = [
        {
            "id": j.id,
            "task": j.task,
            "task_module": j.task.rpartition(".")[0],
            "task_name": j.task.rpartition(".")[2],
            "queue": j.queue,
            "priority": j.priority,
            "execute_at": j.execute_at.isoformat(),
            "due": j.execute_at <= now,
            "when": relative_time(j.execute_at, now, late=True),
            "paused": j.queue in paused,
            "attempt": f"{j.attempts}/{j.max_attempts}",
            "url": reverse("admin:scheduler_app_job_change", args=[j.id]),
        }
        for j in upcoming_jobs(now)
    ]
    upcoming = with_schedule_runs(upcoming, now, paused)
    running = [
        {
            "id": j.id,
            "task": j.task,
            "task_module": j.task.rpartition(".")[0],
            "task_name": j.task.rpartition(".")[2],
            "queue": j.queue,
            "worker": j.worker,
            "attempt": f"{j.attempts}/{j.max_attempts}",
            "started_at": j.started_at.isoformat() if j.started_at else None,
            "elapsed_seconds": round((now - j.started_at).total_seconds(), 1) if j.started_at else None,
            "elapsed": humanize_seconds((now - j.started_at).total_seconds()) if j.started_at else "–",
            "progress": j.progress,
            "percent": round(100 * j.progress["current"] / j.progress["total"]) if j.progress and j.progress.get("total") else None,
            "cancel_requested": j.cancel_requested,
            "url": reverse("admin:scheduler_app_job_change", args=[j.id]),
        }
        for j in Job.objects.running()
        .order_by("started_at", "id")
        .only("id", "task", "queue", "worker", "attempts", "max_attempts", "started_at", "progress", "cancel_requested")[:RUNNING_LIMIT]
    ]
    failures = []
    for j in (
        Job.objects.filter(status=JobStatus.FAILED)
        .order_by("-finished_at", "-id")
        .only("id", "task", "queue", "attempts", "finished_at", "errors")[:FAILURES_LIMIT]
    ):
        exception_class, message = last_error_message(j)
        failures.append(
            {
                "id": j.id,
                "task": j.task,
                "task_module": j.task.rpartition(".")[0],
                "task_name": j.task.rpartition(".")[2],
                "queue": j.queue,
                "attempts": j.attempts,
                "finished_at": j.finished_at.isoformat() if j.finished_at else None,
                "ago": relative_time(j.finished_at, now) if j.finished_at else "–",
                "exception_class": exception_class.rpartition(".")[2],
                "message": message,
                "url": reverse("admin:scheduler_app_job_change", args=[j.id]),
            }
        )
    # Live dispatchers, and the ones that stopped or went silent in the last hour.
    recent = Q(state="alive") | Q(last_heartbeat__gte=now - timedelta(hours=1))
    workers = []
    for w in Worker.objects.filter(recent).order_by("-last_heartbeat")[:WORKERS_LIMIT]:
        slots = stats.worker_slots(w)
        workers.append(
            {
                "id": w.id,
                "hostname": w.hostname,
                "pid": w.pid,
                "queues": list(w.queues or []),
                "slots": slots,
                "slots_text": ", ".join(f"{q}: {n}" for q, n in sorted(slots.items())) or "–",
                "shared": "*" in (w.slots or {}),
                "state": worker_state(w, now),
                "heartbeat_age_seconds": round((now - w.last_heartbeat).total_seconds(), 1),
                "heartbeat_age": humanize_seconds((now - w.last_heartbeat).total_seconds()),
                "running": w.running,
                "processed": w.processed,
                "failed": w.failed,
                "url": reverse("admin:scheduler_app_worker_change", args=[w.id]),
            }
        )
    series = stats.throughput_series(now, minutes=60)
    lag = stats.oldest_due_lag(now)
    return {
        "generated_at": now.isoformat(),
        "counts": counts,
        "status_cards": [
            {"status": s, "label": JobStatus(s).label, "count": counts[s]} for s in JobStatus.values
        ],
        "total": sum(counts.values()),
        "due_now": sum(q["due"] for q in queues),
        "oldest_due_lag_seconds": lag,
        "oldest_due_lag": humanize_seconds(lag) if lag else "–",
        "throughput": stats.throughput(now),
        "throughput_series": series,
        "queues": queues,
        "upcoming": upcoming,
        "running": running,
        "running_more": max(counts[JobStatus.RUNNING] - len(running), 0),
        "failures": failures,
        "workers": workers,
        "workers_alive": sum(1 for w in workers if w["state"] == "alive"),
    }


def render_sections(request, data):
    """Return ``{section: html}`` rendered by the same templates as the page."""
    context = {**data, "chart": throughput_chart(data["throughput_series"]), "can_pause": request.user.has_perm(QUEUE_PERMISSION)}
    return {
        name: render_to_string(f"scheduler_app/dashboard/_{name}.html", context, request=request)
        for name in SECTIONS
    }


# ---------------------------------------------------------------------------
# Views


def _require_view(request):
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied


def dashboard_view(site):
    def view(request):
        _require_view(request)
        data = dashboard_data()
        context = {
            **site.each_context(request),
            "title": "Scheduler dashboard",
            "subtitle": None,
            "sections": render_sections(request, data),
            "data_url": reverse("admin:scheduler_app_dashboard_data"),
            "refresh_ms": REFRESH_SECONDS * 1000,
            "refresh_seconds": REFRESH_SECONDS,
            "generated_at": data["generated_at"],
            "generated_time": timezone.localtime(_parse(data["generated_at"])).strftime("%H:%M:%S"),
        }
        request.current_app = site.name
        return render(request, "admin/scheduler_app/dashboard.html", context)

    return view


def dashboard_data_view(request):
    """Return the dashboard's numbers and each section's HTML as JSON.

    ``took_ms`` tells the page how long this took; it polls less often when
    the numbers are expensive (a huge table), so open dashboards never keep
    the database busy.
    """
    _require_view(request)
    started = time.monotonic()
    data = dashboard_data()
    html = render_sections(request, data)
    return JsonResponse({**data, "html": html, "took_ms": round((time.monotonic() - started) * 1000)})


@require_POST
def queue_toggle_view(request, name, action):
    """Pause or resume a queue through the lifecycle; JSON for fetch(), else redirect."""
    if action not in ("pause", "resume"):
        raise Http404("Unknown queue action.")
    if not request.user.has_perm(QUEUE_PERMISSION):
        raise PermissionDenied
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        if action == "pause":
            lifecycle.pause_queue(name)
        else:
            lifecycle.resume_queue(name)
    except ValidationError as exc:
        error = "; ".join(exc.messages)
        if wants_json:
            return JsonResponse({"error": error}, status=400)
        messages.error(request, error)
        return HttpResponseRedirect(reverse("admin:scheduler_app_dashboard"))
    done = "paused" if action == "pause" else "resumed"
    if wants_json:
        return JsonResponse({"queue": name, "paused": action == "pause"})
    messages.success(request, f"Queue “{name}” {done}.")
    return HttpResponseRedirect(reverse("admin:scheduler_app_dashboard"))


def dashboard_urls(site):
    return [
        path("scheduler_app/dashboard/", site.admin_view(dashboard_view(site)), name="scheduler_app_dashboard"),
        path("scheduler_app/dashboard/data/", site.admin_view(dashboard_data_view), name="scheduler_app_dashboard_data"),
        path(
            "scheduler_app/dashboard/queues/<str:name>/<str:action>/",
            site.admin_view(queue_toggle_view),
            name="scheduler_app_queue_toggle",
        ),
    ]


def install(site):
    """Add the dashboard's URLs to ``site`` and list it first in the Scheduler app.

    project/urls.py mounts the default ``admin.site``; this extends that
    instance's ``get_urls`` and ``get_app_list`` rather than replacing the site.
    """
    if getattr(site, "_scheduler_dashboard_installed", False):
        return
    get_urls, get_app_list = site.get_urls, site.get_app_list

    def get_urls_with_dashboard():
        return dashboard_urls(site) + get_urls()

    def get_app_list_with_dashboard(request, app_label=None):
        app_list = get_app_list(request, app_label)
        if not request.user.has_perm(VIEW_PERMISSION):
            return app_list
        for app in app_list:
            if app["app_label"] == "scheduler_app":
                app["models"].insert(
                    0,
                    {
                        "name": "Dashboard",
                        "object_name": "Dashboard",
                        "perms": {"view": True},
                        "admin_url": reverse("admin:scheduler_app_dashboard", current_app=site.name),
                        "add_url": None,
                        "view_only": True,
                    },
                )
        return app_list

    site.get_urls = get_urls_with_dashboard
    site.get_app_list = get_app_list_with_dashboard
    site._scheduler_dashboard_installed = True
