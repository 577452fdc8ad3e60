"""The schedule admin: list, add/change form validation, actions; the dashboard's upcoming runs."""

import re
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from scheduler_app import schedules
from scheduler_app.models import Job, Schedule

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
CHANGELIST = reverse("admin:scheduler_app_schedule_changelist")
ADD_URL = reverse("admin:scheduler_app_schedule_add")
DATA = reverse("admin:scheduler_app_dashboard_data")


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client


def form(**changes):
    data = {
        "name": "nightly",
        "task": ADD,
        "args": "[1, 2]",
        "kwargs": "{}",
        "queue": "",
        "priority": "",
        "max_attempts": "",
        "timeout": "",
        "cron": "0 2 * * 1-5",
        "interval_seconds": "",
        "timezone": "Europe/Berlin",
        "enabled": "on",
        "misfire_policy": "run_once",
        "start_at_0": "",
        "start_at_1": "",
        "end_at_0": "",
        "end_at_1": "",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_list_shows_timetable_next_and_last_run_with_outcome(admin_client_):
    s = schedules.create(name="nightly", task=ADD, args=[1, 2], cron="0 2 * * 1-5", timezone="Europe/Berlin")
    schedules.create(name="often", task=ADD, args=[1, 2], interval_seconds=300)
    off = schedules.create(name="off", task=ADD, args=[1, 2], interval_seconds=60, enabled=False)
    job = schedules.run_now(s.pk)
    Job.objects.filter(pk=job.pk).update(status="succeeded")
    page = admin_client_.get(CHANGELIST).content.decode()
    assert "At 02:00 on Monday through Friday (Europe/Berlin)" in page
    assert "Every 5 minutes" in page
    assert "disabled" in page and off.name in page
    assert "sched-succeeded" in page and reverse("admin:scheduler_app_job_change", args=[job.pk]) in page
    assert 'name="form-0-enabled"' in page  # the enabled toggle


def test_add_form_creates_through_the_service(admin_client_):
    response = admin_client_.post(ADD_URL, form())
    assert response.status_code == 302, response.context["adminform"].form.errors
    s = Schedule.objects.get()
    assert (s.cron, s.timezone, s.queue, s.priority, s.args) == ("0 2 * * 1-5", "Europe/Berlin", "default", 0, [1, 2])
    assert s.next_run_at is not None and s.next_run_at > timezone.now()


@pytest.mark.parametrize(
    "changes, field, fragment",
    [
        ({"cron": "61 2 * * *"}, "cron", "Bad minute"),
        ({"cron": "0 2 * *"}, "cron", "4 fields"),
        ({"timezone": "Europe/Berln"}, "timezone", "Unknown time zone"),
        ({"interval_seconds": "60"}, "__all__", "not both"),
        ({"cron": ""}, "__all__", "Give a cron expression or an interval"),
        ({"args": "{}"}, "args", "Must be a JSON list"),
    ],
)
def test_add_form_shows_errors_inline(admin_client_, changes, field, fragment):
    response = admin_client_.post(ADD_URL, form(**changes))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert fragment in " ".join(errors[field]), errors
    assert not Schedule.objects.exists()
    if field != "__all__":
        assert f"field-{field}" in response.content.decode() and "errorlist" in response.content.decode()


def test_change_form_updates_and_validates(admin_client_):
    s = schedules.create(name="nightly", task=ADD, args=[1, 2], cron="0 2 * * *")
    url = reverse("admin:scheduler_app_schedule_change", args=[s.pk])
    assert admin_client_.get(url).status_code == 200
    response = admin_client_.post(url, form(cron="", interval_seconds="600"))
    assert response.status_code == 302
    s.refresh_from_db()
    assert (s.cron, s.interval_seconds) == ("", 600)
    response = admin_client_.post(url, form(timezone="Nowhere"))
    assert "timezone" in response.context["adminform"].form.errors


def test_run_now_enable_and_disable_actions(admin_client_):
    s = schedules.create(name="x", task=ADD, args=[1, 2], interval_seconds=3600)
    response = admin_client_.post(CHANGELIST, {"action": "run_now", "_selected_action": [s.pk]}, follow=True)
    job = Job.objects.get(schedule=s)
    assert f"#{job.pk}" in " ".join(messages_of(response))
    admin_client_.post(CHANGELIST, {"action": "disable", "_selected_action": [s.pk]})
    s.refresh_from_db()
    assert not s.enabled and s.next_run_at is None
    admin_client_.post(CHANGELIST, {"action": "enable", "_selected_action": [s.pk]})
    s.refresh_from_db()
    assert s.enabled and s.next_run_at is not None


def test_enabled_toggle_in_the_list_goes_through_the_service(admin_client_):
    s = schedules.create(name="x", task=ADD, args=[1, 2], interval_seconds=3600)
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(s.pk),
        "_save": "Save",
    }  # enabled unchecked
    assert admin_client_.post(CHANGELIST, data).status_code == 302
    s.refresh_from_db()
    assert not s.enabled and s.next_run_at is None


def test_delete_keeps_jobs(admin_client_):
    s = schedules.create(name="x", task=ADD, args=[1, 2], interval_seconds=3600)
    job = schedules.run_now(s.pk)
    url = reverse("admin:scheduler_app_schedule_delete", args=[s.pk])
    assert admin_client_.post(url, {"post": "yes"}).status_code == 302
    assert not Schedule.objects.exists()
    assert Job.objects.get(pk=job.pk).schedule_id is None


def test_dashboard_lists_upcoming_schedule_runs_among_jobs(admin_client_):
    now = timezone.now()
    soon = Job.objects.create(task=ADD, execute_at=now + timedelta(minutes=1))
    later = Job.objects.create(task=ADD, execute_at=now + timedelta(minutes=10))
    s = schedules.create(name="every-5", task=ADD, args=[1, 2], interval_seconds=300, now=now)
    schedules.create(name="off", task=ADD, args=[1, 2], interval_seconds=60, enabled=False)
    data = admin_client_.get(DATA).json()
    rows = [(u.get("schedule", False), u["id"]) for u in data["upcoming"]]
    assert rows == [(False, soon.pk), (True, s.pk), (False, later.pk)]
    assert "⟳ every-5" in data["html"]["upcoming"]


def test_job_list_filters_by_schedule_and_the_pages_link_each_other(admin_client_):
    nightly = schedules.create(name="nightly", task=ADD, args=[1, 2], cron="0 3 * * *", timezone="UTC")
    hourly = schedules.create(name="hourly", task=ADD, args=[3, 4], interval_seconds=3600)
    mine = schedules.run_now(nightly.pk)
    theirs = schedules.run_now(hourly.pk)
    loose = Job.objects.create(task=ADD)
    jobs = reverse("admin:scheduler_app_job_changelist")

    def listed(params):
        html = admin_client_.get(jobs, params).content.decode()
        return {int(i) for i in re.findall(r'<th class="field-id"><a href="[^"]*/(\d+)/change/', html)}

    assert listed({"schedule": nightly.pk}) == {mine.pk}
    assert listed({}) == {mine.pk, theirs.pk, loose.pk}
    assert admin_client_.get(jobs, {"schedule": "abc"}).status_code in (200, 302)
    sidebar = admin_client_.get(jobs).content.decode()
    assert f"?schedule={nightly.pk}" in sidebar and "hourly" in sidebar
    # The job names its schedule; the schedule links to its jobs.
    job_page = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[mine.pk])).content.decode()
    assert reverse("admin:scheduler_app_schedule_change", args=[nightly.pk]) in job_page
    schedule_page = admin_client_.get(
        reverse("admin:scheduler_app_schedule_change", args=[nightly.pk])
    ).content.decode()
    assert f"{jobs}?schedule={nightly.pk}" in schedule_page
