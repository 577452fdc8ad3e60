"""The list endpoints cost a fixed number of queries, however many rows a page holds.

Each endpoint is read with 2 rows and again with 30 (one page either way,
so the pagination's COUNT runs in neither) and must cost exactly the pinned
number of queries both times: a serializer field that follows a relation
per row, or a query per queue, fails here.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler_app import lifecycle, schedules
from scheduler_app.models import Job, Queue, Worker
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def make_jobs(numbers, user):
    # Ahead of time: a due row turning late between the two reads (a loaded
    # machine) would add the late reasons' queries (a fixed few, once).
    later = timezone.now() + timedelta(hours=1)
    for i in numbers:
        lifecycle.enqueue(ADD, [i, i], created_by=user, execute_at=later)


def make_schedules(numbers, user):
    for i in numbers:
        schedule = schedules.create(name=f"s{i:02}", task=ADD, args=[i, i], interval_seconds=60 + i)
        schedules.run_now(schedule.pk, created_by=user)  # a last_job, whose status the list shows


def make_workers(numbers, user):
    now = timezone.now()
    Worker.objects.bulk_create(
        Worker(id=f"w{i:02}", hostname="h", pid=i, queues=["default"], slots={"*": 2}, last_heartbeat=now)
        for i in numbers
    )


def make_queues(numbers, user):
    # Every source of a queue row grows: flags, active jobs, live workers' slots.
    names = [f"q{i:02}" for i in numbers]
    Queue.objects.bulk_create(Queue(name=name, paused=i % 2 == 0) for i, name in zip(numbers, names, strict=True))
    past = timezone.now() - timedelta(seconds=5)
    Job.objects.bulk_create(Job(task=ADD, queue=name, execute_at=past) for name in names)
    Worker.objects.create(id=f"w-{names[0]}", hostname="h", pid=1, queues=names, slots={"*": 2})


AUTH = 3  # the token joined to its user, then the permission check: the user's and their groups' permissions

ENDPOINTS = {
    "/api/jobs/": (make_jobs, AUTH + 1),  # the page, created_by joined
    "/api/schedules/": (make_schedules, AUTH + 1),  # the page, last_job joined
    "/api/workers/": (make_workers, AUTH + 1),  # the page
    "/api/queues/": (make_queues, AUTH + 3),  # active jobs by queue, queue flags, live workers
}


def get(api, url):
    with CaptureQueriesContext(connection) as ctx:
        response = api.get(url)
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    rows = body if isinstance(body, list) else body["results"]
    return [q["sql"] for q in ctx.captured_queries], rows


@pytest.mark.parametrize("url", list(ENDPOINTS))
def test_a_page_of_30_rows_costs_what_a_page_of_2_costs(api, staff_user, url):
    make, expected = ENDPOINTS[url]
    make(range(2), staff_user)
    few, rows = get(api, url)
    assert len(rows) >= 2
    make(range(2, 30), staff_user)
    many, rows = get(api, url)
    assert len(rows) >= 30
    assert len(few) == expected, few
    assert len(many) == expected, many


def test_the_rows_carry_what_the_joins_are_for(api, staff_user):
    """The counts above are of pages that show related data, not of bare rows."""
    make_jobs(range(2), staff_user)
    make_schedules(range(2), staff_user)
    _, rows = get(api, "/api/jobs/")
    assert {row["created_by"] for row in rows} == {"staff"}
    _, rows = get(api, "/api/schedules/")
    assert all(row["last_job"] and row["last_job_status"] == "pending" for row in rows)
    make_queues(range(2), staff_user)
    _, rows = get(api, "/api/queues/")
    q00 = next(row for row in rows if row["name"] == "q00")
    assert (q00["paused"], q00["due"], q00["slots"]) == (True, 1, 2)
