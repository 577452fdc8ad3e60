"""Schedules near the end of time (limits.LATEST) and host-dependent time zones.

Nothing is stored or computed past limits.LATEST (9999-12-30T23:59:59Z, a
day short of Python's last date, so that every time zone can show it): a schedule
whose next run would fall after it is refused by ``schedules.clean`` (the
one place: the API and the admin form both go through it), and the
timetable's functions answer "no run" instead of raising OverflowError.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from scheduler_app import schedules
from scheduler_app.models import Job, Schedule
from scheduler_app.schedules import missed_runs, next_run
from scheduler_app.schedules.timetable import BeyondLatest
from scheduler_app.validation.schedules import PAST_LATEST
from scheduler_app.vocabulary.bounds import LATEST

ADD = "tests.testapp.tasks.add"
YEARLY_LATE = {"cron": "0 0 1 1 *", "start_at": "9999-06-01T00:00:00Z"}
JUNE_9999 = datetime(9999, 6, 1, tzinfo=UTC)
YEAR_ONE = datetime(1, 1, 1, tzinfo=UTC)


def cron(expr, tz="UTC", **extra):
    return {"cron": expr, "timezone": tz, "interval_seconds": None, **extra}


def interval(seconds, **extra):
    return {"cron": "", "interval_seconds": seconds, "timezone": "UTC", **extra}


# -- the timetable never raises -------------------------------------------------


@pytest.mark.parametrize(
    "schedule, after",
    [
        (cron("0 0 1 1 *", start_at=JUNE_9999), JUNE_9999),
        (cron("0 0 1 1 *"), datetime(9999, 6, 1, tzinfo=UTC)),
        (cron("59 23 31 12 *", "America/New_York"), datetime(9999, 12, 31, 20, tzinfo=UTC)),
        (cron("* * * * *", "Pacific/Kiritimati"), LATEST - timedelta(seconds=30)),
        (cron("* * * * *", "Pacific/Honolulu"), LATEST),
        (interval(86400), LATEST - timedelta(hours=1)),
        (interval(366 * 86400, start_at=JUNE_9999), JUNE_9999),
    ],
)
def test_no_next_run_past_the_end_of_time(schedule, after):
    assert next_run(schedule, after) is None
    anchored = next_run(schedule, after, anchor=after if schedule["interval_seconds"] else None)
    assert anchored is None
    with pytest.raises(BeyondLatest):
        next_run(schedule, after, strict=True)


def test_the_last_run_before_the_end_of_time_is_still_found():
    last = datetime(9999, 12, 30, 23, 59, tzinfo=UTC)
    assert next_run(cron("59 23 30 12 *"), datetime(9999, 12, 30, tzinfo=UTC)) == last
    assert next_run(interval(60, start_at=last), datetime(9999, 12, 30, tzinfo=UTC)) == last
    # A day short of Python's last date: every time zone can show it.
    assert next_run(cron("0 0 31 12 *"), datetime(9999, 12, 30, tzinfo=UTC)) is None


@pytest.mark.parametrize(
    "schedule, first, now",
    [
        (interval(86400), YEAR_ONE + timedelta(days=1), YEAR_ONE + timedelta(days=3)),
        (interval(366 * 86400), YEAR_ONE, LATEST),
        (cron("0 0 1 1 *"), YEAR_ONE, datetime(3, 6, 1, tzinfo=UTC)),
        (cron("0 0 1 1 *", "America/New_York"), YEAR_ONE + timedelta(days=1), datetime(2, 6, 1, tzinfo=UTC)),
        (cron("* * * * *"), LATEST - timedelta(minutes=3), LATEST),
    ],
)
def test_missed_runs_never_raise_at_either_end(schedule, first, now):
    runs = missed_runs(schedule, first, now, 10)
    assert runs and all(first <= t <= now for t in runs) and runs == sorted(runs)


# -- the service refuses such schedules: one place ------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("enabled", [True, False])
def test_a_yearly_cron_starting_in_june_9999_is_refused(enabled):
    with pytest.raises(ValidationError) as info:
        schedules.create(name="late", task=ADD, args=[1, 2], cron="0 0 1 1 *", start_at=JUNE_9999, enabled=enabled)
    assert info.value.message_dict == {"start_at": [PAST_LATEST]}
    assert not Schedule.objects.exists()


@pytest.mark.django_db
def test_an_interval_whose_first_run_is_the_last_instant_is_accepted_and_then_ends():
    s = schedules.create(name="last", task=ADD, args=[1, 2], interval_seconds=60, start_at=LATEST)
    assert s.next_run_at == LATEST
    assert schedules.materialize_due(LATEST) == [(s.pk, None)]
    assert Job.objects.get(schedule=s).execute_at == LATEST


@pytest.mark.django_db
def test_a_row_planted_near_the_end_of_time_does_not_crash_the_dispatcher():
    s = schedules.create(name="yearly", task=ADD, args=[1, 2], cron="0 0 1 1 *")
    run_time = datetime(9999, 1, 1, tzinfo=UTC)
    Schedule.objects.filter(pk=s.pk).update(next_run_at=run_time)  # around the service
    assert schedules.materialize_due(run_time) == [(s.pk, None)]
    assert Job.objects.get(schedule=s).execute_at == run_time


@pytest.mark.django_db
def test_a_planted_row_whose_plan_overflows_is_stopped(monkeypatch):
    from scheduler_app.schedules import dispatch

    s = schedules.create(name="yearly", task=ADD, args=[1, 2], cron="0 0 1 1 *")

    def overflow(*args):
        raise OverflowError("date value out of range")

    monkeypatch.setattr(dispatch, "plan", overflow)
    assert schedules.materialize_due(s.next_run_at) == [(s.pk, None)]
    assert not Job.objects.exists()


# -- the API and the admin form ---------------------------------------------------


@pytest.mark.django_db
def test_api_post_and_patch_refuse_a_schedule_past_the_end_of_time(api):
    body = {"name": "late", "task": ADD, "args": [1, 2], **YEARLY_LATE}
    response = api.post("/api/schedules/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["start_at"] == [PAST_LATEST]

    created = api.post(
        "/api/schedules/", {"name": "ok", "task": ADD, "args": [1, 2], "cron": "0 0 1 1 *"}, format="json"
    )
    assert created.status_code == 201
    url = f"/api/schedules/{created.json()['id']}/"
    response = api.patch(url, {"start_at": "9999-06-01T00:00:00Z"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["start_at"] == [PAST_LATEST]
    assert Schedule.objects.get().start_at is None


def admin_form(**changes):
    data = {
        "name": "late",
        "task": ADD,
        "args": "[1, 2]",
        "kwargs": "{}",
        "queue": "",
        "priority": "",
        "max_attempts": "",
        "timeout": "",
        "cron": "0 0 1 1 *",
        "interval_seconds": "",
        "timezone": "UTC",
        "enabled": "on",
        "misfire_policy": "run_once",
        "start_at_0": "",
        "start_at_1": "",
        "end_at_0": "",
        "end_at_1": "",
    }
    data.update(changes)
    return data


@pytest.mark.django_db
def test_admin_form_refuses_a_schedule_past_the_end_of_time(client, superuser):
    client.force_login(superuser)
    response = client.post(
        reverse("admin:scheduler_app_schedule_add"), admin_form(start_at_0="9999-06-01", start_at_1="00:00:00")
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["start_at"] == [PAST_LATEST]
    assert not Schedule.objects.exists()


# -- time zones that depend on the host -------------------------------------------

HOST_ZONES = ["localtime", "posixrules", "Factory"]


@pytest.mark.django_db
@pytest.mark.parametrize("zone", HOST_ZONES)
def test_api_refuses_host_dependent_time_zones(api, zone):
    body = {"name": "z", "task": ADD, "args": [1, 2], "cron": "0 2 * * *", "timezone": zone}
    response = api.post("/api/schedules/", body, format="json")
    assert response.status_code == 400
    assert "Unknown time zone" in response.json()["timezone"][0]
    assert not Schedule.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("zone", HOST_ZONES)
def test_admin_refuses_host_dependent_time_zones(client, superuser, zone):
    client.force_login(superuser)
    response = client.post(reverse("admin:scheduler_app_schedule_add"), admin_form(cron="0 2 * * *", timezone=zone))
    assert response.status_code == 200
    assert "Unknown time zone" in " ".join(response.context["adminform"].form.errors["timezone"])
    assert not Schedule.objects.exists()


def test_localtime_would_otherwise_load_as_a_zone():
    # Why the rule exists: the host's /etc/localtime is loadable under that name.
    try:
        ZoneInfo("localtime")
    except Exception:  # noqa: BLE001 - any failure to load it
        pytest.skip("this host has no /etc/localtime")
