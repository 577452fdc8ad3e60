"""The job admin shows a job held back by its concurrency key, its key, limit and expiry."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(staff_user):
    grant(staff_user, "scheduler_app.view_job")
    c = Client()
    c.force_login(staff_user)
    return c


def test_the_list_and_the_page_say_held_by_its_concurrency_key(client, django_assert_max_num_queries):
    first = lifecycle.enqueue(ADD, [1, 2], concurrency_key="acct:1")[0]
    held = lifecycle.enqueue(ADD, [3, 4], concurrency_key="acct:1", expires_in="2h")[0]
    free = lifecycle.enqueue(ADD, [5, 6], concurrency_key="acct:2")[0]
    for i in range(10):
        lifecycle.enqueue(ADD, [i, i], concurrency_key=f"other:{i}")
    Job.objects.filter(pk=first.pk).update(status="running")
    page = client.get("/admin/scheduler_app/job/").content.decode()
    assert page.count("held by its concurrency key") == 1
    body = client.get(f"/admin/scheduler_app/job/{held.pk}/change/").content.decode()
    assert "held by its concurrency key" in body and "acct:1" in body
    assert (
        "held by its concurrency key" not in client.get(f"/admin/scheduler_app/job/{free.pk}/change/").content.decode()
    )
    live = client.get(f"/admin/scheduler_app/job/live/?ids={held.pk},{free.pk}").json()["rows"]
    assert "held by its concurrency key" in live[str(held.pk)]["status_badge"]
    assert "held by its concurrency key" not in live[str(free.pk)]["status_badge"]
    # One query for the whole page's keys, not one per row: ten more keyed rows add no query.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # Every row late from the start: a row turning late between the two pages
    # (a loaded machine) adds the late reasons' queries, once, not per row.
    Job.objects.update(execute_at=timezone.now() - timedelta(hours=1))
    with CaptureQueriesContext(connection) as before:
        client.get("/admin/scheduler_app/job/")
    for i in range(10):
        lifecycle.enqueue(ADD, [i, i], concurrency_key="acct:1", execute_at=timezone.now() - timedelta(hours=1))
    with CaptureQueriesContext(connection) as after:
        client.get("/admin/scheduler_app/job/")
    assert len(after) == len(before)
