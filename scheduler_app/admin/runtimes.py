"""Per-task run times over time, as Sidekiq's Metrics page shows them: p50 and p95 a bucket, a chart a task.

The numbers are the history's (``observability.history``: the dispatchers'
per-minute rollups, percentiles estimated from their histograms); the
charts are inline SVG drawn by ``charts.js`` from each task's series.
"""

from django.utils import timezone

from ..observability import history
from .formatting import humanize_seconds, task_short_html

# The busiest tasks of the range get a chart each (one query a chart).
TASKS_SHOWN = 12


def runtimes(minutes, *, task=None, now=None):
    """Return the tasks of the last ``minutes`` with their run time series, busiest first (``task``: that one only)."""
    now = now or timezone.now()
    rows = history.per_task(minutes, now=now)
    if task:
        rows = [row for row in rows if row["task"] == task]
    shown = []
    for n, row in enumerate(rows[:TASKS_SHOWN]):
        shown.append(
            {
                **row,
                "n": n,
                "json_id": f"sched-runtime-{n}",
                "task_html": task_short_html(row["task"]),
                "p50_text": humanize_seconds(row["p50"]) if row["p50"] is not None else "–",
                "p95_text": humanize_seconds(row["p95"]) if row["p95"] is not None else "–",
                "history": history.series(minutes, task=row["task"], now=now),
            }
        )
    return {"tasks": shown, "more": max(len(rows) - TASKS_SHOWN, 0)}
