"""Durations such as "5m" are taken wherever a duration is (one reader, validation.durations.seconds_of):
a schedule's interval, a queue's rate period (API, admin, settings), and PATCH's delay."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from scheduler_app import conf, lifecycle, schedules
from scheduler_app.models import Job, Queue, Schedule
from tests.plumbing import ADD
from tests.schedules.test_admin import ADD_URL
from tests.schedules.test_admin import form as schedule_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client


@pytest.mark.parametrize("given, stored", [("5m", 300), ("1h30m", 5400), ("90", 90), (120, 120), ("120.0", 120)])
def test_a_schedules_interval_reads_durations(given, stored):
    s = schedules.create(name=f"every-{given}", task=ADD, args=[1, 2], interval_seconds=given)
    assert Schedule.objects.get(pk=s.pk).interval_seconds == stored


@pytest.mark.parametrize("given", ["1.5s", "soon", "0", "-5m", 0.5, True])
def test_a_schedules_interval_refuses_what_is_no_whole_duration(given):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        schedules.create(name="bad", task=ADD, args=[1, 2], interval_seconds=given)
    assert "or a duration such as 90s, 2h" in str(caught.value.message_dict["interval_seconds"])
    assert not Schedule.objects.exists()


def test_the_api_and_the_admin_take_5m_for_an_interval(api, admin_client_):
    response = api.post(
        "/api/schedules/", {"name": "api-5m", "task": ADD, "args": [1, 2], "interval_seconds": "5m"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["interval_seconds"] == 300
    response = admin_client_.post(ADD_URL, schedule_form(name="admin-5m", cron="", interval_seconds="5m"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(name="admin-5m").interval_seconds == 300
    bad = api.patch(
        f"/api/schedules/{Schedule.objects.get(name='api-5m').pk}/", {"interval_seconds": "soon"}, format="json"
    )
    assert bad.status_code == 400 and "interval_seconds" in bad.json()


def test_a_queues_rate_period_reads_durations(api, admin_client_):
    from scheduler_app.lifecycle import queues

    queues.ensure(["slow"])
    response = api.patch("/api/queues/slow/", {"rate_limit": 10, "rate_period": "5m"}, format="json")
    assert response.status_code == 200, response.content
    assert Queue.objects.get(name="slow").rate_period == 300.0
    response = admin_client_.post(
        reverse("admin:scheduler_app_queue_change", args=["slow"]),
        {"concurrency_limit": "", "rate_limit": "10", "rate_period": "1h"},
    )
    assert response.status_code == 302
    assert Queue.objects.get(name="slow").rate_period == 3600.0
    bad = api.patch("/api/queues/slow/", {"rate_period": "2 fortnights"}, format="json")
    assert bad.status_code == 400 and "or a duration such as" in bad.json()["rate_period"][0]
    assert Queue.objects.get(name="slow").rate_period == 3600.0  # a refusal changes nothing


@override_settings(SCHEDULER={"QUEUES": {"slow": {"rate_limit": 5, "rate_period": "10m"}}})
def test_the_queues_setting_reads_durations():
    from scheduler_app.validation.settings import SETTINGS

    assert conf.queue_defaults("slow")["rate_period"] == 600.0
    SETTINGS["QUEUES"].check({"slow": {"rate_limit": 5, "rate_period": "10m"}})  # the system check's rule


def test_patch_delay_reschedules_from_now(api):
    job = lifecycle.enqueue(ADD, [1, 2], execute_at=timezone.now() + timedelta(days=1))[0]
    before = timezone.now()
    response = api.patch(f"/api/jobs/{job.pk}/", {"delay": "5m"}, format="json")
    assert response.status_code == 200, response.content
    at = Job.objects.get(pk=job.pk).execute_at
    assert before + timedelta(minutes=5) <= at <= timezone.now() + timedelta(minutes=5)
    both = api.patch(f"/api/jobs/{job.pk}/", {"delay": "5m", "execute_at": "2030-01-01T00:00:00Z"}, format="json")
    assert both.status_code == 400 and both.json() == {"delay": ["Give either execute_at or delay, not both."]}
    other = api.patch(f"/api/jobs/{job.pk}/", {"queue": "slow"}, format="json")
    assert other.status_code == 400
    assert "a PATCH may only set execute_at (or delay" in other.json()["queue"][0]
    assert Job.objects.get(pk=job.pk).execute_at == at
