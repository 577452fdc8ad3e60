"""A job's progress in the API: {current, total, message, updated_at, text} or null, as the task reported it."""

from datetime import UTC, datetime

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import claim

pytestmark = pytest.mark.django_db


def test_no_progress_is_null(api, enqueue_job):
    job = enqueue_job()
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] is None
    assert api.get("/api/jobs/").json()["results"][0]["progress"] is None


def test_a_reported_progress_with_its_time(api, enqueue_job):
    job = enqueue_job()
    (claimed,) = claim("w1", queues=["default"], limit=1, lease=30)
    at = datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)
    progress = {"current": 3, "total": 4, "message": "step 3 of 4"}
    assert lifecycle.set_progress(claimed.id, "w1", claimed.attempt, progress, now=at)
    expected = {**progress, "updated_at": "2026-03-01T09:00:00.123456Z", "text": "3/4"}  # not "3/4 step 3 of 4"
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] == expected
    assert api.get("/api/jobs/").json()["results"][0]["progress"] == expected


@pytest.mark.parametrize(
    "stored, shown",
    [
        (
            {"current": 1, "total": None, "message": ""},
            {"current": 1, "total": None, "message": "", "updated_at": None, "text": "1"},
        ),
        (
            {"current": "a", "total": True, "message": 7, "updated_at": "not a time"},
            {"current": None, "total": None, "message": "", "updated_at": None, "text": ""},
        ),
        ([1, 2], None),
    ],
)
def test_rows_written_before_updated_at_or_by_odd_tasks_keep_the_shape(api, enqueue_job, stored, shown):
    job = enqueue_job()
    Job.objects.filter(pk=job.pk).update(progress=stored)
    assert api.get(f"/api/jobs/{job.pk}/").json()["progress"] == shown


def test_the_schema_documents_it(api):
    schema = api.get("/api/schema/?format=json").json()
    progress = schema["components"]["schemas"]["Job"]["properties"]["progress"]
    assert progress["nullable"] is True
    assert set(progress["properties"]) == {"current", "total", "message", "updated_at", "text"}


# -- the one rule: what set_progress accepts, and how any stored value is shown ---------

BAD_REPORTS = [
    (("3", "10"), TypeError, "set_progress(): current must be a number or None, not str '3'."),
    ((3, "10"), TypeError, "set_progress(): total must be a number or None, not str '10'."),
    ((True, 10), TypeError, "set_progress(): current must be a number or None, not bool True."),
    ((-1, 10), ValueError, "set_progress(): current must be a number from 0 to 9007199254740992, not -1."),
    ((float("nan"), None), ValueError, "set_progress(): current must be a number from 0 to 9007199254740992, not nan."),
    ((1, float("inf")), ValueError, "set_progress(): total must be a number from 0 to 9007199254740992, not inf."),
    ((11, 10), ValueError, "set_progress(): total (10) must be at least current (11)."),
    ((1, 2, None), TypeError, "set_progress(): message must be text, not NoneType."),
    ((1, 2, "x" * 1001), ValueError, "set_progress(): message must be at most 1000 characters, not 1001."),
]


@pytest.mark.parametrize("args, error, message", BAD_REPORTS)
def test_set_progress_refuses_what_breaks_the_rule_in_the_task(enqueue_job, args, error, message):
    from scheduler_app.context import JobContext

    with pytest.raises(error) as caught:
        JobContext(task_result=None, job_id=1).set_progress(*args)
    assert str(caught.value) == message
    job = enqueue_job()
    (claimed,) = claim("w1", queues=["default"], limit=1, lease=30)
    keys = ("current", "total", "message")
    with pytest.raises(error):
        lifecycle.set_progress(claimed.id, "w1", claimed.attempt, dict(zip(keys, args, strict=False)))
    assert Job.objects.get(pk=job.pk).progress is None


@pytest.mark.parametrize("args", [(None, 10), (0, 0), (2.5, None), (3, 10, "step \x00 \ud800")])
def test_set_progress_accepts_numbers_or_none(enqueue_job, args):
    job = enqueue_job()
    (claimed,) = claim("w1", queues=["default"], limit=1, lease=30)
    keys = ("current", "total", "message")
    assert lifecycle.set_progress(claimed.id, "w1", claimed.attempt, dict(zip(keys, args, strict=False)))
    stored = Job.objects.get(pk=job.pk).progress
    assert (stored["current"], stored["total"]) == args[:2] + (None,) * (2 - len(args[:2]))
    assert stored["message"] == ("step \ufffd \ufffd" if len(args) == 3 else "")


def test_a_task_that_reports_text_for_numbers_fails_with_the_reason():
    from scheduler_app import testing

    bad, _ = lifecycle.enqueue("tests.testapp.tasks.reports", ["3", "10"], max_attempts=1)
    good, _ = lifecycle.enqueue("tests.testapp.tasks.reports", [None, 10])
    assert testing.drain() == {"succeeded": 1, "failed": 1, "cancelled": 0, "snoozed": 0}
    bad.refresh_from_db()
    assert bad.errors[-1]["exception_class"] == "builtins.TypeError"
    assert bad.errors[-1]["message"] == "set_progress(): current must be a number or None, not str '3'."
