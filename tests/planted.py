"""Rows written around the service: one of everything, then values the drivers cannot read put straight in.

``world()`` makes a row of each kind a page shows (jobs in every state,
a dispatcher, a schedule, a limited queue, log records, rollups). The
``plant_*`` functions then write into them with SQL what no entry point
would: times past Python's years, text that is no time, JSON with lone
surrogates, bytes that are not UTF-8. ``PAGES`` and ``API`` are every GET
of the admin and of the API that shows these rows.
"""

import json
from datetime import timedelta

from django.db import connection
from django.db.models import DateTimeField
from django.utils import timezone

from scheduler_app import lifecycle, schedules
from scheduler_app.models import Job, JobLog, Queue, QueueStart, Rollup, Schedule, UniqueWindow, Worker
from scheduler_app.observability import rollups
from scheduler_app.vocabulary.tallies import Tally

ADD = "tests.testapp.tasks.add"
WORKER = "host:1:abc"
# Every table with a time a page shows (or a query of one reads).
TIMED = [Job, Worker, Schedule, Queue, JobLog, Rollup, QueueStart, UniqueWindow]

# What each database holds that Python's datetime does not: PostgreSQL's
# timestamptz goes to year 294276, to infinity, and back to 4713 BC;
# SQLite's is text, anything at all.
# Each with the zone it is shown in: east of UTC for a time past the end,
# west for one before the start (where a zone's date would leave Python's).
PG_TIMES = [
    ("10000-01-01 00:00:00+00", "Asia/Tokyo"),
    ("294276-12-31 23:59:59+00", "UTC"),
    ("infinity", "Asia/Tokyo"),
    ("-infinity", "America/New_York"),
    ("4713-01-01 00:00:00+00 BC", "America/New_York"),
    ("0001-12-31 23:00:00+00 BC", "UTC"),
]
SQLITE_TIMES = [
    ("10000-01-01 00:00:00", "Asia/Tokyo"),
    ("-0001-01-01 00:00:00", "America/New_York"),
    ("not a date", "Asia/Tokyo"),
    ("2026-02-30 10:00:00", "UTC"),
    ("", "America/New_York"),
    ("12:00", "UTC"),
]
# Times Python holds that not every zone does: the last instant, the first.
EDGE_TIMES = [("9999-12-31 23:59:59.999999", "Pacific/Kiritimati"), ("0001-01-01 00:00:00", "Etc/GMT+12")]


def is_postgres():
    return connection.vendor == "postgresql"


def times():
    """Return ``(time text, zone)``: texts this database holds that Python (or the zone) cannot, and a zone to show them in."""
    return (PG_TIMES if is_postgres() else SQLITE_TIMES) + EDGE_TIMES


def world():
    """Make one row of every kind the pages show; return the jobs by name."""
    now = timezone.now()
    Worker.objects.create(
        id=WORKER,
        hostname="host",
        pid=1,
        queues=["default", "slow"],
        slots={"*": 4},
        started_at=now,
        last_heartbeat=now,
        lease_seconds=30,
    )
    Worker.objects.create(
        id="host:2:old",
        hostname="host",
        pid=2,
        queues=["default"],
        slots={"default": 2},
        started_at=now,
        last_heartbeat=now,
        stopped_at=now,
        state="stopped",
    )
    lifecycle.set_limits("default", rate_limit=100, rate_period=60)
    QueueStart.objects.create(queue="default", started_at=now)
    schedule = schedules.create(name="hourly", task=ADD, args=[1, 2], cron="0 * * * *")
    jobs = {
        "pending": lifecycle.enqueue(ADD, [1, 2])[0],
        "due": lifecycle.enqueue(ADD, [1, 2], execute_at=now - timedelta(minutes=5))[0],
        "unique": lifecycle.enqueue(ADD, [1, 2], unique_key="k", unique_for=60)[0],
    }
    jobs["waiting"] = lifecycle.enqueue(ADD, [1, 2], depends_on=[jobs["pending"].pk])[0]
    for name, status in (
        ("running", "running"),
        ("failed", "failed"),
        ("succeeded", "succeeded"),
        ("cancelled", "cancelled"),
    ):
        job = lifecycle.enqueue(ADD, [1, 2])[0]
        fields = {"status": status, "attempts": 1, "worker": WORKER, "started_at": now, "last_attempted_at": now}
        if status == "running":
            fields.update(
                lease_expires_at=now + timedelta(seconds=30),
                progress={"current": 1, "total": 4, "message": "m", "updated_at": now.isoformat()},
            )
        else:
            fields.update(finished_at=now)
        if status == "failed":
            fields.update(
                errors=[
                    {
                        "attempt": 1,
                        "time": now.isoformat(),
                        "worker": WORKER,
                        "exception_class": "ValueError",
                        "message": "no",
                        "traceback": "Traceback",
                    }
                ]
            )
        if status == "succeeded":
            fields.update(result={"sum": 3})
        Job.objects.filter(pk=job.pk).update(schedule=schedule, logs_count=1, **fields)
        JobLog.objects.create(job=job, attempt=1, seq=1, time=now, level=40, logger="tests", message="logged")
        jobs[name] = job
    Schedule.objects.filter(pk=schedule.pk).update(last_run_at=now, last_job=jobs["succeeded"])
    tally = Tally(started=2, succeeded=1, failed=1)
    tally.run.add(0.5)
    tally.wait.add(0.1)
    rollups.record({(now.timestamp(), "default", ADD): tally}, now)
    return jobs


def _columns(model):
    return [f.column for f in model._meta.concrete_fields if isinstance(f, DateTimeField)]


def plant_time(value, models=TIMED, columns=None):
    """Write time text ``value`` into every time column (or ``columns``) of every row of ``models``."""
    cast = "::timestamptz" if is_postgres() else ""
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        for model in models:
            chosen = [c for c in _columns(model) if columns is None or c in columns]
            if not chosen:
                continue
            sets = ", ".join(f"{qn(c)} = %s{cast}" for c in chosen)
            cursor.execute(f"UPDATE {qn(model._meta.db_table)} SET {sets}", [value] * len(chosen))


def plant(model, pk, **columns):
    """Write raw values (SQL parameters: text, bytes) into one row's columns, as they are."""
    qn = connection.ops.quote_name
    sets = ", ".join(f"{qn(c)} = %s" for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(model._meta.pk.column)} = %s",
            [*columns.values(), pk],
        )


def pages(jobs):
    """Every admin GET that shows the rows of ``world()``."""
    failed = jobs["failed"].pk
    ids = ",".join(str(j.pk) for j in jobs.values())
    schedule = Schedule.objects.values_list("pk", flat=True).get()
    lists = ["", "?o=-6", "?execute_at__year=2026", "?finished_at__gte=2026-01-01&q=add", f"?schedule={schedule}"]
    urls = [f"/admin/scheduler_app/job/{query}" for query in lists]
    for name in ("pending", "waiting", "running", "failed", "succeeded"):
        urls.append(f"/admin/scheduler_app/job/{jobs[name].pk}/change/")
    urls += [
        f"/admin/scheduler_app/job/live/?ids={ids}",
        f"/admin/scheduler_app/job/{jobs['running'].pk}/live/",
        f"/admin/scheduler_app/job/{failed}/live/",
        f"/admin/scheduler_app/job/{failed}/delete/",
        "/admin/scheduler_app/dashboard/",
        "/admin/scheduler_app/dashboard/data/?minutes=10080",
        "/admin/scheduler_app/queue/",
        "/admin/scheduler_app/queue/default/change/",
        "/admin/scheduler_app/worker/",
        f"/admin/scheduler_app/worker/{WORKER}/change/",
        "/admin/scheduler_app/schedule/",
        f"/admin/scheduler_app/schedule/{schedule}/change/",
        "/metrics",
    ]
    return urls


def api_urls(jobs):
    """Every API GET that shows the rows of ``world()``."""
    schedule = Schedule.objects.values_list("pk", flat=True).get()
    urls = [
        "/api/jobs/",
        "/api/jobs/?ordering=execute_at",
        "/api/jobs/?ordering=-finished_at",
        "/api/jobs/?ordering=created_at",
        "/api/jobs/?execute_after=2026-01-01T00:00:00Z",
        "/api/jobs/?execute_before=9999-12-30T00:00:00Z",
        "/api/jobs/?status=running,failed",
        f"/api/jobs/?depends_on={jobs['pending'].pk}",
        f"/api/jobs/?schedule={schedule}",
        "/api/workers/",
        "/api/queues/",
        "/api/queues/default/",
        "/api/stats/",
        "/api/stats/history/",
        "/api/stats/history/?minutes=10080",
        "/api/schedules/",
        f"/api/schedules/{schedule}/",
        "/api/tasks/",
    ]
    for job in jobs.values():
        urls += [f"/api/jobs/{job.pk}/", f"/api/jobs/{job.pk}/logs/"]
    return urls


def visit(client, urls):
    """GET each URL; return those that failed, with the error.

    A page fails with a 500, or with a body a browser cannot read: JSON that
    ``JSON.parse`` refuses (NaN, Infinity) or text that is not UTF-8.
    """
    client.raise_request_exception = False
    failed = []
    for url in urls:
        response = client.get(url)
        if response.status_code >= 500:
            failed.append((url, response.status_code, repr(getattr(response, "exc_info", (None, None))[1])))
        elif response.get("Content-Type", "").startswith("application/json"):
            json.loads(response.content, parse_constant=_no_such_number)
        else:
            response.content.decode("utf-8")
    return failed


def _no_such_number(name):
    raise ValueError(f"{name} is not JSON")
