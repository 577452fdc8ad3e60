"""A job's progress in the API: {current, total, message, updated_at} or null, as the task reported it."""

from datetime import UTC, datetime

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job

pytestmark = pytest.mark.django_db


def test_no_progress_is_null(api, make_job):
    job = make_job()
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] is None
    assert api.get("/api/jobs/").json()["results"][0]["progress"] is None


def test_a_reported_progress_with_its_time(api, make_job):
    job = make_job()
    (claimed,) = lifecycle.claim("w1", queues=["default"], limit=1, lease=30)
    at = datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)
    progress = {"current": 3, "total": 4, "message": "step 3 of 4"}
    assert lifecycle.set_progress(claimed.id, "w1", claimed.attempt, progress, now=at)
    expected = {**progress, "updated_at": "2026-03-01T09:00:00.123456Z"}
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] == expected
    assert api.get("/api/jobs/").json()["results"][0]["progress"] == expected


@pytest.mark.parametrize(
    "stored, shown",
    [
        ({"current": 1, "total": None, "message": ""}, {"current": 1, "total": None, "message": "", "updated_at": None}),
        ({"current": "a", "total": True, "message": 7, "updated_at": "not a time"},
         {"current": None, "total": None, "message": "", "updated_at": None}),
        ([1, 2], None),
    ],
)
def test_rows_written_before_updated_at_or_by_odd_tasks_keep_the_shape(api, make_job, stored, shown):
    job = make_job()
    Job.objects.filter(pk=job.pk).update(progress=stored)
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] == shown


def test_the_schema_documents_it(api):
    schema = api.get("/api/schema/?format=json").json()
    progress = schema["components"]["schemas"]["Job"]["properties"]["progress"]
    assert progress["nullable"] is True
    assert set(progress["properties"]) == {"current", "total", "message", "updated_at"}
