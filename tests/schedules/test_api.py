"""REST API of schedules: CRUD, run, validation errors, permissions, jobs by schedule."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler_app import schedules
from scheduler_app.models import Job, Schedule

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
BODY = {"name": "nightly", "task": ADD, "args": [1, 2], "cron": "0 2 * * 1-5", "timezone": "Europe/Berlin"}
REPRESENTATION = {
    "id",
    "name",
    "task",
    "args",
    "kwargs",
    "queue",
    "priority",
    "cron",
    "interval_seconds",
    "timezone",
    "enabled",
    "misfire_policy",
    "next_run_at",
    "last_run_at",
}


def test_create_retrieve_list_update_delete(api):
    response = api.post("/api/schedules/", BODY, format="json")
    assert response.status_code == 201, response.data
    data = response.data
    assert set(data) >= REPRESENTATION
    assert data["cron"] == "0 2 * * 1-5" and data["interval_seconds"] is None
    assert data["queue"] == "default" and data["misfire_policy"] == "run_once" and data["enabled"]
    assert data["description"] == "At 02:00 on Monday through Friday (Europe/Berlin)"
    assert data["next_run_at"] and data["last_run_at"] is None
    assert response["Location"].endswith(f"/api/schedules/{data['id']}/")
    url = f"/api/schedules/{data['id']}/"

    assert api.get(url).data["name"] == "nightly"
    assert [s["id"] for s in api.get("/api/schedules/").data["results"]] == [data["id"]]

    # Switching to an interval clears the cron expression.
    response = api.patch(url, {"interval_seconds": 300}, format="json")
    assert response.status_code == 200, response.data
    assert response.data["cron"] is None and response.data["interval_seconds"] == 300
    assert response.data["description"] == "Every 5 minutes"

    response = api.put(url, {**BODY, "name": "renamed", "cron": "*/15 * * * *"}, format="json")
    assert response.status_code == 200, response.data
    assert (response.data["name"], response.data["cron"], response.data["interval_seconds"]) == (
        "renamed",
        "*/15 * * * *",
        None,
    )

    response = api.patch(url, {"enabled": False}, format="json")
    assert response.data["enabled"] is False and response.data["next_run_at"] is None

    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    "changes, field, fragment",
    [
        ({"cron": "61 * * * *"}, "cron", "Bad minute"),
        ({"cron": "* * * *"}, "cron", "4 fields"),
        ({"timezone": "Europe/Berln"}, "timezone", "Unknown time zone"),
        ({"interval_seconds": 60}, "non_field_errors", "not both"),
        ({"cron": None}, "non_field_errors", "Give a cron expression or an interval"),
        ({"task": "os.system"}, "task", "not a registered task"),
        ({"queue": "nope"}, "queue", "Unknown queue"),
        ({"misfire_policy": "later"}, "misfire_policy", "Must be one of run_once, skip, catch_up."),
        (
            {"interval_seconds": 0, "cron": None},
            "interval_seconds",
            "Must be a whole number of seconds from 1 to 31622400, or a duration such as 90s, 2h, 3d or 1h30m.",
        ),
        ({"start_at": "2030-01-01T00:00:00"}, "start_at", "time zone offset"),
        ({"surprise": 1}, "surprise", "Unknown field"),
    ],
)
def test_invalid_bodies_are_400_with_a_clear_message(api, changes, field, fragment):
    response = api.post("/api/schedules/", {**BODY, **changes}, format="json")
    assert response.status_code == 400
    assert fragment in str(response.data[field][0]), response.data
    assert not Schedule.objects.exists()


def test_update_validation_and_duplicate_names(api):
    api.post("/api/schedules/", BODY, format="json")
    other = api.post("/api/schedules/", {**BODY, "name": "other"}, format="json").data
    response = api.patch(f"/api/schedules/{other['id']}/", {"name": "nightly"}, format="json")
    assert response.status_code == 400 and "already exists" in str(response.data["name"][0])
    response = api.patch(f"/api/schedules/{other['id']}/", {"timezone": "Mars/Olympus"}, format="json")
    assert response.status_code == 400 and "time zone" in str(response.data["timezone"][0])
    assert Schedule.objects.get(pk=other["id"]).timezone == "Europe/Berlin"


def test_run_enqueues_one_job_now_and_jobs_filter_by_schedule(api):
    s = api.post("/api/schedules/", BODY, format="json").data
    response = api.post(f"/api/schedules/{s['id']}/run/")
    assert response.status_code == 201, response.data
    job = response.data
    assert job["schedule"] == s["id"] and job["task"] == ADD and job["status"] == "pending"
    Job.objects.create(task=ADD)  # not from the schedule
    listed = api.get(f"/api/jobs/?schedule={s['id']}").data["results"]
    assert [j["id"] for j in listed] == [job["id"]]
    assert api.get("/api/jobs/?schedule=abc").status_code == 400
    detail = api.get(f"/api/schedules/{s['id']}/").data
    assert detail["last_job"] == job["id"] and detail["last_job_status"] == "pending"
    assert detail["next_run_at"] == s["next_run_at"]


def test_materialised_jobs_carry_the_schedule(api):
    s = schedules.create(name="x", task=ADD, args=[1, 1], interval_seconds=60)
    schedules.materialize_due(s.next_run_at)
    [job] = api.get(f"/api/jobs/?schedule={s.pk}").data["results"]
    assert job["schedule"] == s.pk and job["unique_key"].startswith(f"schedule:{s.pk}:")


def test_unknown_ids_are_404(api):
    for path in ("/api/schedules/999/", "/api/schedules/abc/", f"/api/schedules/{2**64}/"):
        assert api.get(path).status_code == 404
    assert api.post("/api/schedules/999/run/").status_code == 404
    assert api.delete("/api/schedules/999/").status_code == 404


def test_staff_only(non_staff):
    s = schedules.create(
        name="x", task=ADD, args=[1, 2], interval_seconds=60, start_at=timezone.now() + timedelta(hours=1)
    )
    calls = [
        ("get", "/api/schedules/", None),
        ("post", "/api/schedules/", BODY),
        ("get", f"/api/schedules/{s.pk}/", None),
        ("patch", f"/api/schedules/{s.pk}/", {"enabled": False}),
        ("put", f"/api/schedules/{s.pk}/", BODY),
        ("delete", f"/api/schedules/{s.pk}/", None),
        ("post", f"/api/schedules/{s.pk}/run/", None),
    ]
    for method, path, body in calls:
        assert getattr(APIClient(), method)(path, body, format="json").status_code == 401, path
        assert getattr(non_staff, method)(path, body, format="json").status_code == 403, path
    assert Schedule.objects.get(pk=s.pk).enabled and not Job.objects.exists()
