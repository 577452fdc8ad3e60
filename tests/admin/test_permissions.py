"""Who may see and do what: the console is for staff, and model permissions apply."""

import pytest
from django.urls import reverse

from scheduler_app.models import Job, JobStatus, Queue
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:scheduler_app_dashboard")
DATA = reverse("admin:scheduler_app_dashboard_data")
CHANGELIST = reverse("admin:scheduler_app_job_changelist")
ADD_URL = reverse("admin:scheduler_app_job_add")
WORKERS = reverse("admin:scheduler_app_worker_changelist")
PAUSE = reverse("admin:scheduler_app_queue_toggle", args=["default", "pause"])


def pages(job):
    return [CHANGELIST, ADD_URL, reverse("admin:scheduler_app_job_change", args=[job.pk]), WORKERS, DASHBOARD, DATA]


@pytest.mark.parametrize("who", ["anonymous", "plain_user"])
def test_non_staff_see_nothing_and_change_nothing(client, request, who, job_row):
    job = job_row()
    if who == "plain_user":
        client.force_login(request.getfixturevalue("plain_user"))
    for url in pages(job):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url
    assert client.post(PAUSE).status_code == 302
    assert client.post(CHANGELIST, {"action": "cancel_jobs", "_selected_action": [job.pk]}).status_code == 302
    assert client.post(ADD_URL, {"task": ADD, "args": "[]", "kwargs": "{}"}).status_code == 302
    assert not Queue.objects.filter(paused=True).exists()
    assert list(Job.objects.values_list("status", flat=True)) == [JobStatus.PENDING]


def test_staff_without_permissions_get_403_and_no_dashboard_link(client, staff_user, job_row):
    job = job_row()
    client.force_login(staff_user)
    for url in pages(job):
        assert client.get(url).status_code == 403, url
    assert client.post(PAUSE).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert DASHBOARD not in index


def test_view_only_staff_can_watch_but_not_act(client, staff_user, job_row):
    grant(staff_user, "view_job", "view_worker")
    job = job_row()
    client.force_login(staff_user)
    assert client.get(DASHBOARD).status_code == 200
    assert client.get(DATA).status_code == 200
    assert DASHBOARD in client.get(reverse("admin:index")).content.decode()
    listing = client.get(CHANGELIST).content.decode()
    assert "cancel_jobs" not in listing  # actions need the change permission
    client.post(CHANGELIST, {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING
    assert client.get(ADD_URL).status_code == 403
    detail = client.get(reverse("admin:scheduler_app_job_change", args=[job.pk])).content.decode()
    assert 'name="priority"' not in detail
    dashboard = client.get(DASHBOARD).content.decode()
    assert ">Pause queue</button>" not in dashboard  # pausing needs change_queue
    assert client.post(PAUSE).status_code == 403
    assert not Queue.objects.filter(paused=True).exists()


def test_staff_with_change_permissions_can_act(client, staff_user, job_row):
    grant(staff_user, "view_job", "change_job", "add_job", "change_queue")
    job = job_row()
    client.force_login(staff_user)
    client.post(CHANGELIST, {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert client.post(PAUSE).status_code == 302
    assert Queue.objects.get(name="default").paused
    assert client.post(ADD_URL, {"task": ADD, "args": "[1, 1]", "kwargs": "{}"}).status_code == 302
    assert Job.objects.filter(created_by=staff_user).count() == 1


@pytest.mark.parametrize(
    ("perms", "status"),
    [
        ((), 403),
        (("view_dashboard",), 200),
        (("view_job",), 200),  # what the dashboard needed before it had a permission of its own
        (("change_queue", "view_worker"), 403),
    ],
)
def test_who_sees_the_dashboard(client, staff_user, perms, status):
    if perms:  # grant() with none gives every permission
        grant(staff_user, *perms)
    client.force_login(staff_user)
    assert client.get(DASHBOARD).status_code == status
    assert client.get(DATA).status_code == status
    listed = DASHBOARD in client.get(reverse("admin:index")).content.decode()
    assert listed is (status == 200)


def test_view_dashboard_alone_watches_the_dashboard_only(client, staff_user, job_row):
    grant(staff_user, "view_dashboard")
    job_row()
    client.force_login(staff_user)
    page = client.get(DASHBOARD).content.decode()
    assert 'id="sched-count-pending">1<' in page and ">Pause queue</button>" not in page
    assert client.get(reverse("admin:app_list", args=["scheduler_app"])).status_code == 200
    assert client.get(CHANGELIST).status_code == 403
    assert client.post(PAUSE).status_code == 403
    grant(staff_user, "change_queue")
    assert client.post(PAUSE).status_code == 302
    assert Queue.objects.get(name="default").paused
