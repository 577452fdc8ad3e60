"""Issue 26 in the API: ?tag=, ?search= inside args/kwargs/meta, bulk cancel and retry by the list's filter, schedules ahead."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle, schedules
from scheduler_app.lifecycle import bulk
from scheduler_app.models import Job, JobStatus
from tests.plumbing import ADD, grant, token_client

pytestmark = pytest.mark.django_db


def ids(response):
    assert response.status_code == 200, response.content
    return sorted(job["id"] for job in response.json()["results"])


# -- tags and search --------------------------------------------------------


def test_tag_filter_any_of_several(api, job_row):
    a = job_row(tags=["incident:42", "eu"])
    b = job_row(tags=["us"])
    job_row(tags=[])
    assert ids(api.get("/api/jobs/?tag=eu")) == [a.pk]
    assert ids(api.get("/api/jobs/?tag=eu&tag=us")) == [a.pk, b.pk]
    assert ids(api.get("/api/jobs/?tag=incident:42&status=pending")) == [a.pk]
    assert ids(api.get("/api/jobs/?tag=EU")) == []  # tags are case-sensitive


@pytest.mark.parametrize("query", ["tag=has%20space", "tag=" + "x" * 65, "&".join(f"tag=t{i}" for i in range(21))])
def test_a_bad_tag_is_a_400(api, query):
    response = api.get("/api/jobs/?" + query)
    assert response.status_code == 400
    assert "tag" in response.json()


def test_search_finds_text_inside_args_kwargs_and_meta(api, job_row):
    in_args = job_row(args=["customer-4711", 2])
    in_kwargs = job_row(task="tests.testapp.tasks.noop", args=[], kwargs={"email": "Ann@Example.com"})
    in_meta = job_row(meta={"incident": "INC-1234", "who": "Zoë"})
    by_key = job_row(unique_key="nightly-report")
    job_row(args=[1, 2])
    assert ids(api.get("/api/jobs/?search=customer-47")) == [in_args.pk]
    assert ids(api.get("/api/jobs/?search=ann@example")) == [in_kwargs.pk]  # any case
    assert ids(api.get("/api/jobs/?search=inc-1234")) == [in_meta.pk]
    assert ids(api.get("/api/jobs/?search=zoë")) == [in_meta.pk]  # non-ASCII (SQLite stores \\u escapes)
    assert ids(api.get("/api/jobs/?search=nightly")) == [by_key.pk]
    assert ids(api.get("/api/jobs/?search=testapp.tasks.noop")) == [in_kwargs.pk]
    assert ids(api.get(f"/api/jobs/?search={in_meta.pk}")) == [in_meta.pk]
    assert ids(api.get("/api/jobs/?search=100%25")) == []  # LIKE wildcards are text
    assert ids(api.get("/api/jobs/?search=_")) == []


def test_search_follows_inserts_and_deletes(api, job_row, enqueue_job):
    made = enqueue_job(kwargs=None, tags=["x"], meta={"needle": "haystack-77"})
    bulk_made = lifecycle.enqueue_many([{"task": ADD, "args": [5, 6], "meta": {"needle": "haystack-78"}}])
    assert ids(api.get("/api/jobs/?search=haystack-7")) == sorted([made.pk, bulk_made[0].pk])
    Job.objects.filter(pk=made.pk).delete()
    assert ids(api.get("/api/jobs/?search=haystack-7")) == [bulk_made[0].pk]


def test_the_representation_shows_tags_and_meta(api, job_row):
    job = job_row(tags=["a", "b"], meta={"k": [1, 2]})
    assert {k: api.get(f"/api/jobs/{job.pk}/").json()[k] for k in ("tags", "meta")} == {
        "tags": ["a", "b"],
        "meta": {"k": [1, 2]},
    }
    listed = api.get("/api/jobs/").json()["results"][0]
    assert (listed["tags"], listed["meta"]) == (["a", "b"], {"k": [1, 2]})


# -- bulk cancel and retry -----------------------------------------------------


def test_bulk_cancel_by_the_lists_filter(api, job_row):
    pending = [job_row(queue="slow", tags=["incident"]) for _ in range(3)]
    running = job_row(JobStatus.RUNNING, queue="slow", tags=["incident"])
    other_queue = job_row(queue="other", tags=["incident"])
    done = job_row(JobStatus.SUCCEEDED, queue="slow", tags=["incident"])
    response = api.post("/api/jobs/cancel/", {"filter": {"queue": "slow", "tag": ["incident"]}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"cancelled": 4, "cancel_requested": 1}
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert [statuses[j.pk] for j in pending] == ["cancelled"] * 3
    assert statuses[running.pk] == "running" and Job.objects.get(pk=running.pk).cancel_requested
    assert (statuses[other_queue.pk], statuses[done.pk]) == ("pending", "succeeded")


def test_bulk_cancel_cancels_dependents_as_a_cancel_does(api, enqueue_job):
    first = enqueue_job(queue="slow")
    dependent = enqueue_job(depends_on=[first.pk])
    response = api.post("/api/jobs/cancel/", {"filter": {"queue": "slow"}}, format="json")
    assert response.json()["cancelled"] == 1
    dependent.refresh_from_db()
    assert dependent.status == JobStatus.CANCELLED
    assert "depends on it" in dependent.errors[-1]["message"]


def test_bulk_retry(api, job_row):
    failed = [job_row(JobStatus.FAILED, attempts=3, max_attempts=3) for _ in range(3)]
    cancelled = job_row(JobStatus.CANCELLED, tags=["x"])
    keyed = job_row(JobStatus.FAILED, unique_key="k1")
    job_row(JobStatus.PENDING, unique_key="k1")  # holds the key: the keyed job cannot be retried
    job_row(JobStatus.SUCCEEDED)
    response = api.post("/api/jobs/retry/", {"filter": {"status": "failed,cancelled"}}, format="json")
    assert response.status_code == 200
    assert response.json() == {"retried": 4}
    for job in [*failed, cancelled]:
        job.refresh_from_db()
        assert (job.status, job.finished_at) == (JobStatus.PENDING, None)
    assert Job.objects.get(pk=failed[0].pk).max_attempts == 4  # one more attempt, as a retry gives
    assert Job.objects.get(pk=keyed.pk).status == JobStatus.FAILED


def test_bulk_in_batches_leaves_what_changed_meanwhile_alone(api, job_row, monkeypatch):
    jobs = [job_row(queue="slow", priority=0) for _ in range(5)]
    real = bulk.batches

    def batches_while_others_act(jobs_qs, statuses, size):
        for number, batch in enumerate(real(jobs_qs, statuses, 2)):
            if number == 0:
                # After the ids were taken, before their compare-and-set: one job starts
                # elsewhere and is finished, another is rescheduled out of the filter.
                Job.objects.filter(pk=jobs[0].pk).update(status=JobStatus.SUCCEEDED, finished_at=timezone.now())
                lifecycle.reschedule(jobs[1].pk, priority=50)
            yield batch

    monkeypatch.setattr(bulk, "batches", batches_while_others_act)
    response = api.post("/api/jobs/cancel/", {"filter": {"queue": "slow", "priority_max": 10}}, format="json")
    assert response.json() == {"cancelled": 3, "cancel_requested": 0}
    statuses = [Job.objects.get(pk=j.pk).status for j in jobs]
    assert statuses == ["succeeded", "pending", "cancelled", "cancelled", "cancelled"]


def test_batches_are_bounded_and_by_keyset(job_row):
    made = [job_row() for _ in range(5)]
    got = list(bulk.batches(Job.objects.all(), [JobStatus.PENDING], 2))
    assert got == [[made[0].pk, made[1].pk], [made[2].pk, made[3].pk], [made[4].pk]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "filter"),  # the key is required: {} must be said
        ({"filter": None}, "filter"),
        ({"filter": [1]}, "filter"),
        ({"filter": {"statuss": "failed"}}, "statuss"),
        ({"filter": {"status": "done"}}, "status"),
        ({"filter": {"ordering": "id"}}, "ordering"),
        ({"filter": {"tag": "not a list"}}, "tag"),
        ({"filter": {"tag": ["bad tag"]}}, "tag"),
        ({"filter": {"queue": 5}}, "queue"),
        ({"filter": {"queue": ""}}, "queue"),
        ({"filter": {"priority_min": "high"}}, "priority_min"),
        ({"filter": {"execute_after": "2026-01-01T00:00:00"}}, "execute_after"),
        ({"filter": {}, "extra": 1}, "extra"),
    ],
)
def test_a_bad_filter_is_a_400_and_changes_nothing(api, job_row, body, field):
    job = job_row()
    for path in ("/api/jobs/cancel/", "/api/jobs/retry/"):
        response = api.post(path, body, format="json")
        assert response.status_code == 400, response.content
        errors = response.json()
        assert field in errors or field in errors.get("filter", {}), errors
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING


def test_an_empty_filter_is_every_job(api, job_row):
    job_row(), job_row(queue="other"), job_row(JobStatus.FAILED)
    assert api.post("/api/jobs/cancel/", {"filter": {}}, format="json").json()["cancelled"] == 2


def test_bulk_actions_need_change_job(staff_user, job_row):
    job = job_row()
    viewer = token_client(grant(staff_user, "view_job"))
    for path in ("/api/jobs/cancel/", "/api/jobs/retry/"):
        assert viewer.post(path, {"filter": {}}, format="json").status_code == 403
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING


def test_time_range_filters(api, job_row):
    old = job_row(
        JobStatus.FAILED, created_at=datetime(2026, 1, 1, tzinfo=UTC), finished_at=datetime(2026, 1, 2, tzinfo=UTC)
    )
    new = job_row(JobStatus.FAILED)
    assert ids(api.get("/api/jobs/?created_before=2026-01-01T12:00:00Z")) == [old.pk]
    assert ids(api.get("/api/jobs/?finished_after=2026-06-01T00:00:00%2B00:00")) == [new.pk]
    response = api.post("/api/jobs/retry/", {"filter": {"finished_before": "2026-02-01T00:00:00Z"}}, format="json")
    assert response.json() == {"retried": 1}


# -- schedules ahead -------------------------------------------------------------


@pytest.fixture
def hourly(db):
    return schedules.create(name="hourly", task=ADD, args=[1, 2], cron="0 * * * *", timezone="Europe/Berlin")


def test_next_runs_of_a_schedule(api, hourly):
    response = api.get(f"/api/schedules/{hourly.pk}/next/")
    assert response.status_code == 200
    runs = response.json()
    assert len(runs) == 10 and all(run.endswith("Z") for run in runs)
    times = [datetime.fromisoformat(run) for run in runs]
    assert all(b - a == timedelta(hours=1) for a, b in zip(times, times[1:], strict=False))
    assert times[0] == hourly.next_run_at
    assert len(api.get(f"/api/schedules/{hourly.pk}/next/?count=100").json()) == 100
    assert len(api.get(f"/api/schedules/{hourly.pk}/next/?count=1").json()) == 1


@pytest.mark.parametrize("count", ["0", "101", "x", "1.5", "-1"])
def test_next_runs_count_out_of_range_is_a_400(api, hourly, count):
    response = api.get(f"/api/schedules/{hourly.pk}/next/?count={count}")
    assert response.status_code == 400
    assert response.json()["count"] == ["Must be a whole number from 1 to 100."]


def test_next_runs_end_with_the_schedule_and_a_disabled_one_has_none(api):
    ending = schedules.create(
        name="ending",
        task=ADD,
        args=[1, 2],
        interval_seconds=3600,
        start_at=timezone.now() + timedelta(hours=1),
        end_at=timezone.now() + timedelta(hours=3, minutes=30),
    )
    assert len(api.get(f"/api/schedules/{ending.pk}/next/").json()) == 3
    schedules.disable(ending.pk)
    assert api.get(f"/api/schedules/{ending.pk}/next/").json() == []
    assert api.get("/api/schedules/999999/next/").status_code == 404


def test_bulk_by_a_filter_that_joins(api, enqueue_job):
    first = enqueue_job()
    dependents = [enqueue_job(depends_on=[first.pk]) for _ in range(2)]
    unrelated = enqueue_job()
    response = api.post("/api/jobs/cancel/", {"filter": {"depends_on": first.pk, "search": "testapp"}}, format="json")
    assert response.json() == {"cancelled": 2, "cancel_requested": 0}
    assert [Job.objects.get(pk=j.pk).status for j in (*dependents, first, unrelated)] == [
        "cancelled",
        "cancelled",
        "pending",
        "pending",
    ]
    retried = api.post("/api/jobs/retry/", {"filter": {"depends_on": first.pk}}, format="json")
    assert retried.json() == {"retried": 2}
    assert [Job.objects.get(pk=j.pk).status for j in dependents] == ["waiting", "waiting"]
