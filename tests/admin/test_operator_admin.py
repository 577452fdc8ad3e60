"""Issue 26 in the admin: tags in the list (column, filter), meta on the job page, all N matching, coming runs."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from scheduler_app import schedules
from scheduler_app.models import Job, JobStatus
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:scheduler_app_job_changelist")
NEXT_RUNS = reverse("admin:scheduler_app_schedule_next_runs")


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_tags_column_is_compact_and_the_page_shows_tags_and_meta(admin_client_, job_row):
    job = job_row(tags=["a", "b", "c", "d", "e"], meta={"incident": "INC-9"})
    html = admin_client_.get(CHANGELIST).content.decode()
    # In the task's cell: the first two, and how many more.
    assert '<span class="job-tag" title="b">b</span> <span class="sched-more">+3</span>' in html
    assert 'title="c"' not in html
    page = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[job.pk])).content.decode()
    assert '<span class="job-tag">e</span>' in page and "INC-9" in page


def test_tag_filter(admin_client_, job_row):
    tagged = job_row(tags=["eu"])
    job_row(tags=["us"])
    html = admin_client_.get(CHANGELIST).content.decode()
    assert "?tag=eu" in html and "?tag=us" in html  # the choices: tags of the newest jobs
    response = admin_client_.get(CHANGELIST + "?tag=eu")
    assert [j.pk for j in response.context["cl"].result_list] == [tagged.pk]
    assert list(admin_client_.get(CHANGELIST + "?tag=not%20a%20tag").context["cl"].result_list) == []


def test_retry_all_matching_after_a_page_that_counts_them(admin_client_, job_row):
    failed = [job_row(JobStatus.FAILED, tags=["incident"]) for _ in range(3)]
    job_row(JobStatus.FAILED)
    body = {"action": "retry_jobs", "select_across": "1", "_selected_action": [failed[0].pk]}
    page = admin_client_.post(CHANGELIST + "?tag=incident", body)
    html = page.content.decode()
    assert "3 jobs match this filter" in html and 'name="confirmed"' in html
    assert Job.objects.filter(status=JobStatus.FAILED).count() == 4
    done = admin_client_.post(CHANGELIST + "?tag=incident", {**body, "confirmed": "3"}, follow=True)
    assert messages_of(done) == ["Queued 3 jobs to run again (at their time if still ahead, else now)."]
    assert Job.objects.filter(status=JobStatus.FAILED).count() == 1


def test_all_matching_needs_change_job(client, staff_user, job_row):
    job = job_row()
    grant(staff_user, "view_job")
    client.force_login(staff_user)
    body = {"action": "cancel_jobs", "select_across": "1", "_selected_action": [job.pk], "confirmed": "1"}
    client.post(CHANGELIST, body)
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING


def test_schedule_page_shows_the_next_five_runs(admin_client_):
    schedule = schedules.create(name="daily", task=ADD, args=[1, 2], cron="30 2 * * *")
    html = admin_client_.get(reverse("admin:scheduler_app_schedule_change", args=[schedule.pk])).content.decode()
    assert html.count("02:30:00") >= 5 and 'id="coming-runs"' in html and NEXT_RUNS in html
    assert 'id="coming-runs"' in admin_client_.get(reverse("admin:scheduler_app_schedule_add")).content.decode()


def test_the_endpoint_answers_as_the_cron_is_typed(admin_client_):
    response = admin_client_.get(NEXT_RUNS, {"cron": "0 9 * * 1", "timezone": "Europe/Berlin"})
    assert response.status_code == 200
    body = response.json()
    assert len(body["runs"]) == 5 and len(body["shown"]) == 5
    assert all(run.endswith(":00:00Z") for run in body["runs"])
    interval = admin_client_.get(NEXT_RUNS, {"interval_seconds": "60"}).json()
    assert len(interval["runs"]) == 5


@pytest.mark.parametrize(
    "query",
    [
        {"cron": "61 * * * *"},
        {"cron": "* * * * *", "timezone": "Mars/Base"},
        {},
        {"cron": "* * * * *", "interval_seconds": "5"},
        {"interval_seconds": "x"},
    ],
)
def test_the_endpoint_refuses_bad_timetables(admin_client_, query):
    response = admin_client_.get(NEXT_RUNS, query)
    assert response.status_code == 400
    assert response.json()["error"]


def test_the_endpoint_checks_permissions(db, staff_user):
    client = Client()
    client.force_login(staff_user)  # staff, without schedule permissions
    assert client.get(NEXT_RUNS, {"cron": "* * * * *"}).status_code == 403
    grant(staff_user, "view_schedule")
    assert client.get(NEXT_RUNS, {"cron": "* * * * *"}).status_code == 200
    anonymous = Client().get(NEXT_RUNS, {"cron": "* * * * *"})
    assert anonymous.status_code == 302  # the admin's login
