"""POST /api/jobs/ (and bulk) with a concurrency key or an expiry; a job held back by its key says so."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def test_a_key_and_a_limit_are_set_and_shown(api):
    response = api.post(
        "/api/jobs/", {"task": ADD, "args": [1, 2], "concurrency_key": "acct:1", "concurrency_limit": 2}, format="json"
    )
    assert response.status_code == 201, response.data
    body = response.json()
    assert (body["concurrency_key"], body["concurrency_limit"], body["held_by"]) == ("acct:1", 2, None)


def test_a_job_held_back_by_its_key_says_so_while_it_is(api):
    first = lifecycle.enqueue(ADD, [1, 2], concurrency_key="acct:1")[0]
    second = lifecycle.enqueue(ADD, [3, 4], concurrency_key="acct:1")[0]
    other = lifecycle.enqueue(ADD, [5, 6], concurrency_key="acct:2")[0]
    Job.objects.filter(pk=first.pk).update(status="running")
    held = {j["id"]: j["held_by"] for j in api.get("/api/jobs/").json()["results"]}
    assert held == {first.pk: None, second.pk: "concurrency_key", other.pk: None}
    assert api.get(f"/api/jobs/{second.pk}/").json()["held_by"] == "concurrency_key"
    Job.objects.filter(pk=first.pk).update(status="succeeded")
    assert api.get(f"/api/jobs/{second.pk}/").json()["held_by"] is None


def test_expires_in_takes_seconds_or_a_duration(api):
    before = timezone.now()
    for value, seconds in ((90, 90), ("2h", 7200), ("30m", 1800)):
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "expires_in": value}, format="json")
        assert response.status_code == 201, response.data
        expires = datetime.fromisoformat(response.json()["expires_at"])
        assert before + timedelta(seconds=seconds) <= expires <= timezone.now() + timedelta(seconds=seconds)


def test_expires_at_is_an_aware_time(api):
    response = api.post(
        "/api/jobs/", {"task": ADD, "args": [1, 2], "expires_at": "2030-01-01T09:00:00+02:00"}, format="json"
    )
    assert response.status_code == 201, response.data
    assert datetime.fromisoformat(response.json()["expires_at"]) == datetime(2030, 1, 1, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_in": 60, "expires_at": "2030-01-01T09:00:00Z"}, "expires_in"),
        ({"expires_in": "soon"}, "expires_in"),
        ({"expires_in": -1}, "expires_in"),
        ({"expires_in": [1]}, "expires_in"),
        ({"expires_at": "2030-01-01T09:00:00"}, "expires_at"),
        ({"concurrency_key": "k" * 300}, "concurrency_key"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit"),
        ({"concurrency_key": "k", "concurrency_limit": "2"}, "concurrency_limit"),
        ({"concurrency_limit": 3}, "concurrency_limit"),
    ],
)
def test_bad_values_are_400_with_field_errors(api, body, field):
    response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], **body}, format="json")
    assert response.status_code == 400, response.data
    assert field in response.json()
    assert not Job.objects.exists()


def test_both_expiries_say_give_one(api):
    response = api.post(
        "/api/jobs/",
        {"task": ADD, "args": [1, 2], "expires_in": 60, "expires_at": "2030-01-01T09:00:00Z"},
        format="json",
    )
    assert response.json()["expires_in"] == ["Give either expires_in or expires_at, not both."]


def test_bulk_takes_keys_and_expiry_per_job(api):
    response = api.post(
        "/api/jobs/bulk/",
        {
            "jobs": [
                {"task": ADD, "args": [1, 2], "concurrency_key": "a", "expires_in": "1h"},
                {"task": ADD, "args": [1, 2], "concurrency_key": "a", "concurrency_limit": 3},
            ]
        },
        format="json",
    )
    assert response.status_code == 201, response.data
    rows = list(Job.objects.order_by("id").values_list("concurrency_key", "concurrency_limit", "expires_at"))
    assert rows[0][:2] == ("a", 1) and rows[0][2] is not None
    assert rows[1] == ("a", 3, None)
    bad = api.post(
        "/api/jobs/bulk/",
        {"jobs": [{"task": ADD, "args": [1, 2], "expires_in": 1, "expires_at": "2030-01-01T00:00:00Z"}]},
        format="json",
    )
    assert bad.status_code == 400
