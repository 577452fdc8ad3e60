"""A page shows another model's rows only to a reader who may view that model (admin.visibility).

The dashboard's panels and its JSON, the job page and its live JSON, the job
list's schedule filter: a staff user holding one view permission sees what
that permission's own list would show them, and nothing of the others.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler_app import schedules
from scheduler_app.models import JobStatus, Queue, Worker
from scheduler_app.workflows import chain, step
from tests.plumbing import ADD, grant
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:scheduler_app_dashboard")
DATA = reverse("admin:scheduler_app_dashboard_data")
CHANGELIST = reverse("admin:scheduler_app_job_changelist")
WORKER_ID = "secret-host.example-4242-abcdef"
VIEWS = ["view_dashboard", "view_job", "view_queue", "view_worker", "view_schedule", "view_workflow"]

# What of each model the dashboard may show: in the page, in the JSON's keys.
MARKS = {
    "job": (['data-section="running"', 'data-section="failures"'], ["running", "failures"]),
    "schedule": (["secret-schedule"], []),
    "queue": (['data-section="queues"', "Not listed, paused"], ["queues", "upcoming_paused"]),
    # Not the host's name: a job's worker id (its own column, in the API too) starts with it.
    "worker": (['data-section="workers"', 'id="sched-workers-alive"'], ["workers", "workers_alive"]),
    "workflow": (['id="sched-workflows-running"'], ["workflows"]),
}


@pytest.fixture
def everything(job_row):
    """A row of every model the dashboard shows: a live worker, a schedule, a paused queue, a workflow, jobs."""
    now = timezone.now()
    Worker.objects.create(
        id=WORKER_ID, hostname="secret-host.example", pid=4242, queues=["default"], slots={"*": 2}, last_heartbeat=now
    )
    schedules.create(name="secret-schedule", task=ADD, args=[1, 2], cron="0 * * * *")
    Queue.objects.update_or_create(name="other", defaults={"paused": True})
    job_row(queue="other")
    job_row(status=JobStatus.RUNNING, worker=WORKER_ID)
    job_row(status=JobStatus.FAILED)
    workflow = chain(step(add, 1, 2)).enqueue(name="secret-flow")
    return job_row(
        status=JobStatus.SUCCEEDED,
        worker=WORKER_ID,
        workflow_id=workflow.pk,
        schedule=schedules.create(name="secret-schedule-2", task=ADD, args=[1, 2], cron="0 2 * * *"),
        execute_at=now - timedelta(minutes=1),
    )


def seen(client):
    """Return ``(status, models shown in the page, models shown in the JSON)``."""
    page, data = client.get(DASHBOARD), client.get(DATA)
    assert page.status_code == data.status_code
    if page.status_code != 200:
        return page.status_code, None, None
    html, body = page.content.decode(), data.json()
    in_page = {model for model, (marks, _) in MARKS.items() if any(mark in html for mark in marks)}
    in_json = {model for model, (_, keys) in MARKS.items() if any(key in body for key in keys)}
    if any(row.get("schedule") for row in body.get("upcoming", [])):
        in_json.add("schedule")
    return 200, in_page, in_json


@pytest.mark.parametrize("permission", VIEWS)
def test_one_view_permission_shows_its_own_panels_and_no_others(client, staff_user, everything, permission):
    grant(staff_user, permission)
    client.force_login(staff_user)
    status, in_page, in_json = seen(client)
    if permission in ("view_dashboard", "view_job"):
        expected = {"job"} if permission == "view_job" else set()
        assert (status, in_page, in_json) == (200, expected, expected)
    else:  # the dashboard is not theirs: its numbers need view_dashboard (or view_job)
        assert status == 403


@pytest.mark.parametrize("model", ["job", "schedule", "queue", "worker", "workflow"])
def test_the_dashboard_with_one_more_view_permission_shows_that_models_panels_only(
    client, staff_user, everything, model
):
    grant(staff_user, "view_dashboard", f"view_{model}")
    client.force_login(staff_user)
    status, in_page, in_json = seen(client)
    assert (status, in_page, in_json) == (200, {model}, {model})
    html = client.get(DASHBOARD).content.decode()
    assert 'id="sched-count-pending"' in html and ("secret-host.example" in str(client.get(DATA).json())) is (
        model in ("job", "worker")
    )
    assert (reverse("admin:scheduler_app_worker_changelist") in html) is (model == "worker")
    assert (reverse("admin:scheduler_app_queue_changelist") in html) is (model == "queue")


def test_every_view_permission_shows_every_panel(client, staff_user, everything):
    grant(staff_user, *VIEWS)
    client.force_login(staff_user)
    assert seen(client) == (200, set(MARKS), set(MARKS))


def test_the_job_page_and_its_live_json_name_no_schedule_workflow_or_worker_state_the_reader_may_not_view(
    client, staff_user, everything
):
    job = everything
    page_url = reverse("admin:scheduler_app_job_change", args=[job.pk])
    live_url = reverse("admin:scheduler_app_job_page_live", args=[job.pk])
    grant(staff_user, "view_job")
    client.force_login(staff_user)
    page, live = client.get(page_url).content.decode(), client.get(live_url).json()
    for secret in ("secret-schedule-2", "secret-flow", "sched-worker-alive"):
        assert secret not in page and secret not in str(live), secret
    assert f"#{job.schedule_id}" in page and f"#{job.workflow_id}" in page and WORKER_ID in page
    assert "worker_plain" in live["fields"] and "worker_display" not in live["fields"]
    listing = client.get(CHANGELIST).content.decode()
    assert "secret-schedule" not in listing  # the schedule filter lists names only to who may view schedules

    grant(staff_user, "view_schedule", "view_workflow", "view_worker")
    page, live = client.get(page_url).content.decode(), client.get(live_url).json()
    for secret in ("secret-schedule-2", "secret-flow", "sched-worker-alive"):
        assert secret in page, secret
    assert "worker_display" in live["fields"] and "sched-worker-alive" in live["fields"]["worker_display"]
    assert "secret-schedule" in client.get(CHANGELIST).content.decode()
