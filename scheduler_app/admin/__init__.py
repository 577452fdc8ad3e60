"""The Django admin console: jobs, schedules, dispatcher processes and the dashboard.

Importing the package registers the model admins on ``admin.site``:

    jobs.py        JobAdmin and its actions (cancel, retry, run now)
    schedules.py   ScheduleAdmin and ScheduleForm
    workers.py     WorkerAdmin (read-only)
    dashboard.py   DashboardAdmin: the live page, its JSON feed, queue pause/resume
    changelist.py  capped paginator, filters, date range, calendar drill-down
    formatting.py  durations, relative times, badges, task paths, JSON
    chart.py       the throughput chart's geometry

Entry points only: changes go through ``lifecycle`` and ``schedules``;
numbers come from ``stats``.
"""

from . import dashboard, jobs, schedules, workers  # noqa: F401  (each registers its ModelAdmin)
