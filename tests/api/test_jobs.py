"""POST/GET/PATCH /api/jobs/ and the cancel, retry and bulk actions."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from scheduler_app.models import Job
from tests.plumbing import ADD

IMPORTANT = "tests.testapp.tasks.important"
JOB_FIELDS = {
    "id",
    "url",
    "task",
    "args",
    "kwargs",
    "queue",
    "priority",
    "execute_at",
    "status",
    "attempts",
    "max_attempts",
    "timeout",
    "unique_key",
    "result",
    "errors",
    "cancel_requested",
    "progress",
    "worker",
    "created_by",
    "created_at",
    "updated_at",
    "started_at",
    "last_attempted_at",
    "finished_at",
    "schedule",
    "logs_count",
    "snoozes",
    "on_dependency_failure",
    "tags",
    "meta",
    "dependencies_left",
    "depends_on",
    "dependents",
    "concurrency_key",
    "concurrency_limit",
    "expires_at",
    "held_by",
    "late_reason",
    "truncated",
}

pytestmark = pytest.mark.django_db


def has_offset(text):
    return datetime.fromisoformat(text).utcoffset() is not None


class TestCreate:
    def test_creates_a_job_with_the_tasks_defaults(self, api, staff_user):
        response = api.post("/api/jobs/", {"task": IMPORTANT, "args": [7]}, format="json")
        assert response.status_code == 201, response.data
        body = response.json()
        assert set(body) == JOB_FIELDS
        job = Job.objects.get()
        assert body["id"] == job.pk
        assert body["url"] == f"http://testserver/api/jobs/{job.pk}/"
        assert response["Location"] == body["url"]
        assert (body["priority"], body["queue"], body["status"]) == (10, "other", "pending")
        assert body["args"] == [7] and body["kwargs"] == {}
        assert body["created_by"] == "staff"
        assert job.created_by == staff_user
        for field in ("execute_at", "created_at", "updated_at"):
            assert has_offset(body[field])
        assert body["started_at"] is None and body["last_attempted_at"] is None and body["finished_at"] is None
        assert abs(job.execute_at - timezone.now()) < timedelta(seconds=5)

    def test_every_option(self, api):
        when = "2030-01-02T03:04:05+02:00"
        response = api.post(
            "/api/jobs/",
            {
                "task": ADD,
                "args": [1],
                "kwargs": {"b": 2},
                "execute_at": when,
                "priority": -100,
                "queue": "slow",
                "max_attempts": 100,
                "timeout": 2.5,
                "unique_key": "k-1",
            },
            format="json",
        )
        assert response.status_code == 201, response.data
        job = Job.objects.get()
        assert job.execute_at == datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)
        assert (job.priority, job.queue, job.max_attempts, job.timeout, job.unique_key) == (
            -100,
            "slow",
            100,
            2.5,
            "k-1",
        )
        assert job.kwargs == {"b": 2}

    def test_delay(self, api):
        before = timezone.now()
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "delay": 3600}, format="json")
        assert response.status_code == 201
        job = Job.objects.get()
        assert before + timedelta(seconds=3600) <= job.execute_at <= timezone.now() + timedelta(seconds=3600)

    def test_zero_delay_is_now(self, api):
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "delay": 0}, format="json")
        assert response.status_code == 201
        assert Job.objects.get().execute_at <= timezone.now()

    def test_unique_key_of_an_active_job_returns_it_with_200(self, api, enqueue_job):
        existing = enqueue_job(unique_key="once")
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "unique_key": "once"}, format="json")
        assert response.status_code == 200
        assert response.json()["id"] == existing.pk
        assert Job.objects.count() == 1

    def test_unique_key_of_a_finished_job_creates_a_new_one(self, api, enqueue_job, set_status):
        set_status(enqueue_job(unique_key="again"), "succeeded")
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "unique_key": "again"}, format="json")
        assert response.status_code == 201
        assert Job.objects.count() == 2


def post_job(api, body, **extra):
    return api.post("/api/jobs/", body, format="json", **extra)


class TestCreateErrors:
    @pytest.mark.parametrize(
        ("body", "field", "fragment"),
        [
            ({}, "task", "required"),
            ({"task": "os.system"}, "task", "GET /api/tasks/"),
            ({"task": 5}, "task", "not a registered task"),
            ({"task": ADD, "args": "1,2"}, "args", "Must be a JSON list of positional arguments."),
            ({"task": ADD, "args": {"a": 1}}, "args", "Must be a JSON list of positional arguments."),
            ({"task": ADD, "args": [1, 2], "kwargs": [1]}, "kwargs", "Must be a JSON object of keyword arguments."),
            ({"task": ADD, "args": [1, 2], "kwargs": "x=1"}, "kwargs", "Must be a JSON object of keyword arguments."),
            ({"task": ADD, "args": ["a\x00b"]}, "args", "NUL"),
            ({"task": ADD, "args": [1, 2], "kwargs": {"k\x00": 1}}, "kwargs", "NUL"),
            ({"task": ADD, "args": [1, 2], "priority": 101}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "priority": -101}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "priority": 1.5}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "priority": "high"}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "priority": True}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "priority": 10**30}, "priority", "Must be a whole number from -100 to 100."),
            ({"task": ADD, "args": [1, 2], "queue": "nope"}, "queue", "Unknown queue"),
            ({"task": ADD, "args": [1, 2], "queue": 3}, "queue", "Unknown queue"),
            ({"task": ADD, "args": [1, 2], "max_attempts": 0}, "max_attempts", "Must be a whole number from 1 to 100."),
            (
                {"task": ADD, "args": [1, 2], "max_attempts": 101},
                "max_attempts",
                "Must be a whole number from 1 to 100.",
            ),
            ({"task": ADD, "args": [1, 2], "timeout": 0}, "timeout", "from 0.001 to"),
            ({"task": ADD, "args": [1, 2], "timeout": -1}, "timeout", "from 0.001 to"),
            (
                {"task": ADD, "args": [1, 2], "timeout": "soon"},
                "timeout",
                "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
            ),
            (
                {"task": ADD, "args": [1, 2], "delay": -1},
                "delay",
                "Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m.",
            ),
            (
                {"task": ADD, "args": [1, 2], "delay": 1e300},
                "delay",
                "Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m.",
            ),
            ({"task": ADD, "args": [1, 2], "delay": 5, "execute_at": "2030-01-01T00:00:00Z"}, "delay", "not both"),
            ({"task": ADD, "args": [1, 2], "execute_at": "2030-01-01T00:00:00"}, "execute_at", "offset"),
            (
                {"task": ADD, "args": [1, 2], "execute_at": "tomorrow"},
                "execute_at",
                "Must be an ISO 8601 date and time",
            ),
            (
                {"task": ADD, "args": [1, 2], "execute_at": 1700000000},
                "execute_at",
                "Must be an ISO 8601 date and time",
            ),
            (
                {"task": ADD, "args": [1, 2], "execute_at": "9999-12-31T23:59:59-05:00"},
                "execute_at",
                "Must be no later than 9999-12-30T23:59:59Z.",
            ),
            (
                {"task": ADD, "args": [1, 2], "unique_key": "x" * 256},
                "unique_key",
                "Must be text of at most 255 characters.",
            ),
            (
                {"task": ADD, "args": [1, 2], "unique_key": ["k"]},
                "unique_key",
                "Must be text of at most 255 characters.",
            ),
            ({"task": ADD, "args": [1, 2], "status": "succeeded"}, "status", "Unknown field"),
        ],
    )
    def test_bad_field(self, api, body, field, fragment):
        response = post_job(api, body)
        assert response.status_code == 400, response.data
        errors = response.json()
        assert field in errors, errors
        assert isinstance(errors[field], list)
        assert fragment in " ".join(errors[field])
        assert Job.objects.count() == 0

    def test_unknown_task_message_points_to_the_task_list(self, api):
        message = post_job(api, {"task": "nope"}).json()["task"][0]
        assert message == (
            "'nope' is not a registered task. Tasks must be @task functions in an "
            "installed app's tasks.py (or a module in SCHEDULER['TASK_MODULES']); GET /api/tasks/ lists them."
        )

    def test_all_field_errors_are_reported_at_once(self, api):
        errors = post_job(api, {"task": "x", "priority": 500, "bogus": 1}).json()
        assert set(errors) == {"task", "priority", "bogus"}

    @pytest.mark.parametrize("body", [[], [{"task": ADD, "args": [1, 2]}], "job", 3, None])
    def test_body_that_is_not_an_object(self, api, body):
        response = api.post("/api/jobs/", json.dumps(body), content_type="application/json")
        assert response.status_code == 400
        assert "non_field_errors" in response.json()

    @pytest.mark.parametrize(
        "raw",
        [
            b"{",
            b'{"task": NaN}',
            b'{"task": "x", "args": [Infinity]}',
            b"\xff\xfe{}",
            b"[" * 100_000 + b"]" * 100_000,
            b'{"task": "' + b"1" * 10 + b'", "args": [' + b"9" * 5000 + b"]}",
        ],
    )
    def test_malformed_json_is_a_parse_error(self, api, raw):
        response = api.post("/api/jobs/", raw, content_type="application/json")
        assert response.status_code == 400
        assert "JSON parse error" in response.json()["detail"]

    def test_json_nested_too_deep_for_storage(self, api):
        args = [1]
        for _ in range(200):
            args = [args]
        response = post_job(api, {"task": ADD, "args": args})
        assert response.status_code == 400
        assert "Nested more than" in response.json()["args"][0]

    def test_lone_surrogate_in_args(self, api):
        raw = b'{"task": "%s", "args": ["\\ud800"]}' % ADD.encode()
        response = api.post("/api/jobs/", raw, content_type="application/json")
        assert response.status_code == 400
        assert "surrogate" in response.json()["args"][0]

    def test_infinite_number_in_args(self, api):
        raw = b'{"task": "%s", "args": [1e400]}' % ADD.encode()
        response = api.post("/api/jobs/", raw, content_type="application/json")
        assert response.status_code == 400
        assert "args" in response.json()

    def test_form_encoded_body_is_unsupported(self, api):
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2]})  # multipart
        assert response.status_code == 415
        assert "detail" in response.json()

    def test_oversized_body_is_413(self, api, settings):
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
        response = post_job(api, {"task": ADD, "args": ["x" * 2000]})
        assert response.status_code == 413
        assert "1000 bytes" in response.json()["detail"]
        assert Job.objects.count() == 0

    def test_default_body_limit_is_djangos(self, api):
        response = post_job(api, {"task": ADD, "args": ["x" * 3_000_000]})
        assert response.status_code == 413


class TestBulk:
    def test_creates_all_in_order(self, api):
        jobs = [{"task": ADD, "args": [i, i]} for i in range(5)] + [{"task": IMPORTANT}]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201, response.data
        body = response.json()
        assert [j["args"] for j in body] == [[i, i] for i in range(5)] + [[]]
        assert body[-1]["queue"] == "other"
        assert set(body[0]) == JOB_FIELDS
        assert Job.objects.count() == 6
        assert all(j["created_by"] == "staff" for j in body)

    def test_a_thousand_jobs(self, api, django_assert_max_num_queries):
        jobs = [{"task": ADD, "args": [i, 1]} for i in range(1000)]
        with django_assert_max_num_queries(20):
            response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201
        assert Job.objects.count() == 1000

    def test_more_than_a_thousand_is_refused(self, api):
        jobs = [{"task": ADD, "args": [1, 2]}] * 1001
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        assert "no more than 1000" in response.json()["jobs"][0]
        assert Job.objects.count() == 0

    def test_errors_by_index_and_nothing_created(self, api):
        jobs = [
            {"task": ADD, "args": [1, 2]},
            {"task": "nope"},
            {"task": ADD, "args": [1, 2], "priority": 1000, "extra": 1},
            {"task": ADD, "args": [1, 2]},
        ]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        errors = response.json()["jobs"]
        assert set(errors) == {"1", "2"}
        assert "task" in errors["1"]
        assert set(errors["2"]) == {"priority", "extra"}
        assert Job.objects.count() == 0

    def test_lifecycle_errors_by_index(self, api):
        jobs = [
            {"task": ADD, "args": [1, 2], "unique_key": "same"},
            {"task": ADD, "args": [1, 2], "unique_key": "same"},
        ]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        assert response.json() == {"jobs": {"1": {"unique_key": ["Same unique_key as job 0 of this request."]}}}
        assert Job.objects.count() == 0

    def test_unique_key_held_by_an_active_job_yields_that_job(self, api, enqueue_job):
        existing = enqueue_job(unique_key="held")
        jobs = [{"task": ADD, "args": [1, 2], "unique_key": "held"}, {"task": ADD, "args": [1, 2]}]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201
        assert response.json()[0]["id"] == existing.pk
        assert Job.objects.count() == 2

    @pytest.mark.parametrize(
        ("body", "fragment"),
        [
            ({}, "required"),
            ({"jobs": []}, "may not be empty"),
            ({"jobs": {"task": ADD, "args": [1, 2]}}, "Expected a list"),
            ({"jobs": [{"task": ADD, "args": [1, 2]}], "atomic": True}, "Unknown field"),
        ],
    )
    def test_bad_shapes(self, api, body, fragment):
        response = api.post("/api/jobs/bulk/", body, format="json")
        assert response.status_code == 400
        assert fragment in json.dumps(response.json())
        assert Job.objects.count() == 0

    def test_item_that_is_not_an_object(self, api):
        response = api.post("/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2]}, 5]}, format="json")
        assert response.status_code == 400
        assert "non_field_errors" in response.json()["jobs"]["1"]


class TestRetrieve:
    def test_one_job(self, api, enqueue_job, set_status):
        job = set_status(enqueue_job(), "failed", result=None, errors=[{"attempt": 1, "message": "x"}], attempts=1)
        body = api.get(f"/api/jobs/{job.pk}/").json()
        assert set(body) == JOB_FIELDS
        assert body["status"] == "failed" and body["errors"][0]["message"] == "x"
        assert has_offset(body["finished_at"])
        assert body["created_by"] is None

    @pytest.mark.parametrize("job_id", ["999999", "abc", "99999999999999999999999", "-1", "١"])
    def test_unknown_id_is_404(self, api, job_id):
        for method in ("get", "patch"):
            response = getattr(api, method)(f"/api/jobs/{job_id}/", {}, format="json")
            assert response.status_code == 404
            assert "detail" in response.json()
        for path in ("cancel", "retry"):
            response = api.post(f"/api/jobs/{job_id}/{path}/")
            assert response.status_code == 404
            assert "detail" in response.json()

    def test_wrong_methods_are_405(self, api, enqueue_job):
        job = enqueue_job()
        for method, url in [
            ("put", f"/api/jobs/{job.pk}/"),
            ("delete", f"/api/jobs/{job.pk}/"),
            ("delete", "/api/jobs/"),
            ("get", f"/api/jobs/{job.pk}/cancel/"),
            ("get", "/api/jobs/bulk/"),
            ("post", "/api/tasks/"),
            ("post", "/api/stats/"),
            ("get", "/api/queues/default/pause/"),
        ]:
            response = getattr(api, method)(url, {}, format="json")
            assert response.status_code == 405, (method, url)
            assert "detail" in response.json()
        assert Job.objects.get().status == "pending"


class TestReschedule:
    def test_execute_at_and_priority(self, api, enqueue_job):
        job = enqueue_job()
        response = api.patch(
            f"/api/jobs/{job.pk}/", {"execute_at": "2031-05-06T07:08:09-03:00", "priority": 42}, format="json"
        )
        assert response.status_code == 200, response.data
        job.refresh_from_db()
        assert job.execute_at == datetime(2031, 5, 6, 10, 8, 9, tzinfo=UTC)
        assert job.priority == 42
        assert response.json()["priority"] == 42

    def test_priority_only(self, api, enqueue_job):
        job = enqueue_job()
        before = job.execute_at
        assert api.patch(f"/api/jobs/{job.pk}/", {"priority": -5}, format="json").status_code == 200
        job.refresh_from_db()
        assert (job.priority, job.execute_at) == (-5, before)

    def test_wakes_the_dispatcher(self, api, enqueue_job, django_capture_on_commit_callbacks):
        from scheduler_app import signals

        job = enqueue_job()
        seen = []

        def receiver(sender, message, **kwargs):
            seen.append(message.to_dict())

        signals.jobs_changed.connect(receiver)
        try:
            with django_capture_on_commit_callbacks(execute=True):
                api.patch(f"/api/jobs/{job.pk}/", {"priority": 3}, format="json")
        finally:
            signals.jobs_changed.disconnect(receiver)
        assert seen and seen[-1]["jobs"][0][0] == job.pk and seen[-1]["jobs"][0][2] == 3

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"queue": "slow"}, "queue"),
            ({"priority": 1, "args": [1]}, "args"),
            ({"status": "cancelled"}, "status"),
            ({"priority": 101}, "priority"),
            ({"priority": None}, "priority"),
            ({"execute_at": "2031-01-01T00:00:00"}, "execute_at"),
            ({"execute_at": None}, "execute_at"),
            ({}, "non_field_errors"),
        ],
    )
    def test_anything_else_is_400_naming_the_field(self, api, enqueue_job, body, field):
        job = enqueue_job()
        response = api.patch(f"/api/jobs/{job.pk}/", body, format="json")
        assert response.status_code == 400
        assert field in response.json()
        job_after = Job.objects.get(pk=job.pk)
        assert (job_after.priority, job_after.execute_at, job_after.queue) == (job.priority, job.execute_at, job.queue)

    def test_unknown_key_message(self, api, enqueue_job):
        job = enqueue_job()
        response = api.patch(f"/api/jobs/{job.pk}/", {"queue": "slow"}, format="json")
        assert "only set execute_at (or delay: a duration from now) and priority" in response.json()["queue"][0]

    @pytest.mark.parametrize("status", ["running", "succeeded", "failed", "cancelled"])
    def test_not_pending_is_409(self, api, enqueue_job, set_status, status):
        job = set_status(enqueue_job(), status)
        response = api.patch(f"/api/jobs/{job.pk}/", {"priority": 5}, format="json")
        assert response.status_code == 409
        assert set(response.json()) == {"detail"}
        assert status in response.json()["detail"]
        assert Job.objects.get(pk=job.pk).priority == job.priority


class TestCancel:
    def test_pending_is_cancelled_at_once(self, api, enqueue_job):
        job = enqueue_job()
        response = api.post(f"/api/jobs/{job.pk}/cancel/")
        assert response.status_code == 200
        assert response.json()["status"] == "cancelled"
        assert has_offset(response.json()["finished_at"])
        assert Job.objects.get(pk=job.pk).status == "cancelled"

    def test_running_gets_cancel_requested(self, api, enqueue_job, set_status):
        job = set_status(enqueue_job(), "running")
        response = api.post(f"/api/jobs/{job.pk}/cancel/")
        assert response.status_code == 200
        body = response.json()
        assert (body["status"], body["cancel_requested"]) == ("running", True)

    @pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled"])
    def test_finished_is_409(self, api, enqueue_job, set_status, status):
        job = set_status(enqueue_job(), status)
        response = api.post(f"/api/jobs/{job.pk}/cancel/")
        assert response.status_code == 409
        assert "cancel" in response.json()["detail"]

    def test_body_is_ignored(self, api, enqueue_job):
        job = enqueue_job()
        response = api.post(f"/api/jobs/{job.pk}/cancel/", {"anything": 1}, format="json")
        assert response.status_code == 200


class TestRetry:
    @pytest.mark.parametrize("status", ["failed", "cancelled"])
    def test_back_to_pending_now_keeping_errors(self, api, enqueue_job, set_status, status):
        errors = [{"attempt": 1, "message": "boom"}]
        job = set_status(enqueue_job(execute_at=timezone.now() + timedelta(days=1)), status, errors=errors, attempts=3)
        # Its time is ahead: "now" says run it now (without it, it keeps its time: tests/lifecycle/test_retry_time.py).
        response = api.post(f"/api/jobs/{job.pk}/retry/", {"now": True}, format="json")
        assert response.status_code == 200, response.data
        body = response.json()
        assert body["status"] == "pending" and body["errors"] == errors
        assert body["finished_at"] is None
        job.refresh_from_db()
        assert job.execute_at <= timezone.now()
        assert job.max_attempts >= 4

    @pytest.mark.parametrize("status", ["pending", "running", "succeeded"])
    def test_otherwise_409(self, api, enqueue_job, set_status, status):
        job = enqueue_job()
        if status != "pending":
            set_status(job, status)
        response = api.post(f"/api/jobs/{job.pk}/retry/")
        assert response.status_code == 409
        assert response.json()["detail"] == f"Only failed or cancelled jobs can be retried; job {job.pk} is {status}."
