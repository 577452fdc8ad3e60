"""How the admin shows times, durations, statuses, task paths and JSON.

Plain functions shared by the model admins and the dashboard; no queries.
"""

import json
import math
import re

from django.utils import formats, timezone
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import mark_safe

from ..models import JobStatus, stale_before
from ..sql.readable import in_zone


def humanize_seconds(seconds):
    """Return a short duration: '850 ms', '12 s', '5 min', '3 h 4 min', '2 d 3 h' ('–' for NaN or an infinity)."""
    seconds = abs(float(seconds))
    if not math.isfinite(seconds):  # computed from a float column written around the service
        return "–"
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


def exact_time(value):
    """Return a time in the site's zone to the second, with the zone: '2026-11-26 03:39:02 UTC', or '–'.

    In UTC where the site's zone has no such date (a row's END_OF_TIME is in
    year 10000 in Asia/Tokyo: ``readable.in_zone``).
    """
    if value is None:
        return "–"
    local = in_zone(value)
    return f"{formats.date_format(local, 'Y-m-d H:i:s')} {local.strftime('%Z') or formats.date_format(local, 'O')}"


def when_html(value, now=None, *, late=False, zone=True, today=False):
    """Return the one date format of the admin: '2026-11-26 03:39:02 UTC · 2 min ago' (the hint muted).

    ``late``: a past time reads '2 min late' (pending jobs). The whole text
    never wraps inside the time; it may wrap before the hint. ``zone=False``
    leaves the zone's name out (a column whose header names it). ``today``:
    a time on today's date (in the site's zone) shows its time of day only,
    the whole on hover (the job list's one-line rows).
    """
    if value is None:
        return "–"
    now = now or timezone.now()
    hint = relative_time(value, now, late=late)
    css = "sched-late" if late and value <= now else "sched-ago"
    full = exact_time(value)
    shown = full if zone or not in_site_zone(value) else full.rsplit(" ", 1)[0]
    if today and in_site_zone(value) and in_zone(value).date() == in_zone(now).date():
        shown = shown.split(" ", 1)[1]
    return format_html(
        '<span class="sched-when"><time datetime="{}" title="{}">{}</time> <span class="{}">· {}</span></span>',
        value.isoformat(),
        full,
        shown,
        css,
        hint,
    )


def in_site_zone(value):
    """Return whether ``exact_time`` shows ``value`` in the site's zone (not in UTC for want of a date there)."""
    return str(in_zone(value).tzinfo) == timezone.get_current_timezone_name()


def worker_state(worker, now=None):
    """Return 'alive', 'stopped' or 'dead' (alive in the table but silent too long, or since a time no one can read)."""
    if worker.state == "alive" and worker.last_heartbeat is not None and worker.last_heartbeat >= stale_before(now):
        return "alive"
    return "stopped" if worker.state == "stopped" else "dead"


def status_label(status):
    """Return a job status's label ('Pending'), or the raw value if it is unknown."""
    return JobStatus(status).label if status in JobStatus.values else status


def status_badge(status, *, extra=""):
    """Return a job status as a coloured badge, with ``extra`` text after the label."""
    return format_html('<span class="sched-badge sched-{}">{}{}</span>', status, status_label(status), extra)


def task_html(task):
    """Return a task path as 'module.' (muted, may wrap after any dot or underscore) + 'name' (bold)."""
    module, _, name = task.rpartition(".")
    parts = format_html_join("", "{}<wbr>", ((p,) for p in re.split(r"(?<=[._])", module + ".") if p))
    return format_html(
        '<span class="sched-task" title="{}"><span class="sched-module">{}</span><strong>{}</strong></span>',
        task,
        parts,
        name,
    )


def pretty_json(value):
    """Return ``value`` as indented JSON in a <pre>."""
    return format_html(
        '<pre class="sched-json">{}</pre>', json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    )


def task_short_html(task, breaks=False):
    """Return a task's short name (the last dotted part, bold) with its full path on hover.

    ``breaks``: a <wbr> after each underscore, where a long name may break.
    """
    short = task.rpartition(".")[2]
    name = mark_safe("_<wbr>".join(escape(part) for part in short.split("_"))) if breaks else short
    return format_html('<span class="sched-task sched-task-short" title="{}"><strong>{}</strong></span>', task, name)


def worker_short(worker_id):
    """Return a dispatcher id ('host.example.com-12157-33d100') as 'host-12157': the host's first label and the pid."""
    host, _, rest = (worker_id or "").rpartition("-")
    host, _, pid = host.rpartition("-")
    if not host or not pid.isdigit():
        return worker_id or "–"
    return f"{host.split('.')[0]}-{pid}"


def worker_short_html(worker_id):
    """Return ``worker_short`` with the whole id on hover ('–' for none)."""
    if not worker_id:
        return "–"
    return format_html('<span class="sched-worker-id" title="{}">{}</span>', worker_id, worker_short(worker_id))


def clock(value):
    """Return a time of day in the site's zone, 24-hour, with the zone: '07:26:46 UTC' (the live bars' clock)."""
    local = in_zone(value)
    return f"{local.strftime('%H:%M:%S')} {local.strftime('%Z') or formats.date_format(local, 'O')}"


def slots_text(slots, queues):
    """Return a dispatcher's slots so a shared pool never reads as one pool per queue.

    ``slots`` is its stored ``{queue or "*": count}``, ``queues`` the queues
    it serves: '4 slots shared by default, slow', 'slow: 2; 4 slots shared
    by default, mail', 'default: 4, slow: 2'.
    """
    own = {q: n for q, n in slots.items() if q != "*"}
    parts = [", ".join(f"{q}: {n}" for q, n in sorted(own.items()))] if own else []
    if "*" in slots:
        sharing = [q for q in queues if q not in own]
        word = "slot" if slots["*"] == 1 else "slots"
        parts.append(
            f"{slots['*']} {word} shared by {', '.join(sharing)}" if sharing else f"{slots['*']} shared {word}"
        )
    return "; ".join(parts) or "–"
