"""The Django admin console: jobs, schedules, dispatcher processes and the dashboard.

Importing the package registers the model admins on ``admin.site``:

    jobs.py        JobAdmin and its actions (cancel, retry, run now)
    schedules.py   ScheduleAdmin and ScheduleForm
    workers.py     WorkerAdmin (read-only)
    audit.py       AuditEventAdmin (the read-only audit page), each object's History, audit() for the actions
    workflows.py   WorkflowAdmin: the list, a workflow's page with its graph (graph.py), retry and cancel
    queues.py      QueueAdmin: the limits of each queue (concurrency, rate)
    dependencies.py  a job's dependencies and dependents, the "waiting on dependencies" filter
    dashboard.py   DashboardAdmin: the live page, its JSON feed, queue pause/resume
    queues.py      QueueAdmin: the queues page (load, history charts, pause/resume)
    job_fields.py  the job list's columns and the job page's fields (logs too)
    live.py        the job page's and the job list's live JSON
    changelist.py  capped paginator, filters, date range, calendar drill-down
    formatting.py  durations, the one date format, badges, task paths, JSON

Entry points only: changes go through ``lifecycle`` and ``schedules``;
numbers come from ``stats``.
"""

from . import audit, dashboard, jobs, queues, schedules, workers, workflows  # noqa: F401  (each registers its ModelAdmin)
