"""The API's side of flow control: dependencies, unique_for, snoozes, and queue limits (PATCH /api/queues/{name}/)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler_app import lifecycle
from scheduler_app.models import Job, Queue
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


class TestDependencies:
    def test_a_job_with_dependencies_shows_them_and_they_show_it(self, api, enqueue_job):
        first = enqueue_job()
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "depends_on": [first.pk]}, format="json")
        assert response.status_code == 201, response.data
        body = response.json()
        assert (body["status"], body["dependencies_left"], body["on_dependency_failure"]) == ("waiting", 1, "cancel")
        assert body["depends_on"] == [{"id": first.pk, "status": "pending"}] and body["dependents"] == []
        shown = api.get(f"/api/jobs/{first.pk}/").json()
        assert shown["dependents"] == [{"id": body["id"], "status": "waiting"}]
        assert [j["id"] for j in api.get("/api/jobs/?status=waiting").json()["results"]] == [body["id"]]
        assert [j["id"] for j in api.get(f"/api/jobs/?depends_on={first.pk}").json()["results"]] == [body["id"]]

    def test_an_unknown_id_is_a_400_and_nothing_is_made(self, api):
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "depends_on": [123456]}, format="json")
        assert response.status_code == 400
        assert response.json() == {"depends_on": ["No job has the id 123456."]}
        response = api.post(
            "/api/jobs/", {"task": ADD, "args": [1, 2], "on_dependency_failure": "ignore"}, format="json"
        )
        assert response.json() == {"on_dependency_failure": ['Must be "cancel" or "run".']}

    def test_bulk_jobs_refer_to_each_other_by_index(self, api):
        jobs = [
            {"task": ADD, "args": [1, 1]},
            {"task": ADD, "args": [2, 2]},
            {"task": ADD, "args": [3, 3], "depends_on_index": [0, 1], "on_dependency_failure": "run"},
        ]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201, response.data
        body = response.json()
        assert [j["status"] for j in body] == ["pending", "pending", "waiting"]
        assert body[2]["depends_on"] == [
            {"id": body[0]["id"], "status": "pending"},
            {"id": body[1]["id"], "status": "pending"},
        ]
        assert body[0]["dependents"] == [{"id": body[2]["id"], "status": "waiting"}]

    def test_bulk_cycles_and_strangers_are_400s_by_index(self, api):
        jobs = [
            {"task": ADD, "args": [1, 1], "depends_on_index": [1]},
            {"task": ADD, "args": [2, 2], "depends_on_index": [0]},
        ]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        assert response.json() == {
            "jobs": {"0": {"depends_on_index": ["Jobs 0 -> 1 -> 0 of this request depend on each other in a cycle."]}}
        }
        response = api.post(
            "/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 1], "depends_on_index": [3]}]}, format="json"
        )
        assert response.json() == {"jobs": {"0": {"depends_on_index": ["No job 3 in this request (indexes 0 to 0)."]}}}
        response = api.post("/api/jobs/", {"task": ADD, "args": [1, 1], "depends_on_index": [0]}, format="json")
        assert response.json() == {"depends_on_index": ["Unknown field."]}

    @pytest.mark.parametrize("forward", [True, False])
    def test_a_chain_of_a_thousand_jobs_is_made_in_order_and_ended_down_the_chain(self, api, forward):
        # Each job depends on the next one (or the previous): 1,000 levels
        # deep, past Python's recursion limit if anything walks it recursively.
        n = 1000
        jobs = [{"task": ADD, "args": [i, i]} for i in range(n)]
        for i in range(n - 1):
            jobs[i if forward else i + 1]["depends_on_index"] = [i + 1 if forward else i]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201, response.content[:300]
        body = response.json()
        root = body[n - 1] if forward else body[0]
        assert root["status"] == "pending"
        assert sorted(j["status"] for j in body) == ["pending"] + ["waiting"] * (n - 1)
        lifecycle.cancel(root["id"])
        assert set(Job.objects.values_list("status", flat=True)) == {"cancelled"}
        assert api.get("/api/jobs/?page_size=500").status_code == 200

    def test_a_cycle_through_a_thousand_jobs_is_a_400(self, api):
        n = 1000
        jobs = [{"task": ADD, "args": [i, i], "depends_on_index": [(i + 1) % n]} for i in range(n)]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        [(index, errors)] = response.json()["jobs"].items()
        assert index == "0" and errors["depends_on_index"][0].startswith("Jobs 0 -> 1 -> 2 -> ")
        assert errors["depends_on_index"][0].endswith(" -> 999 -> 0 of this request depend on each other in a cycle.")

    def test_a_page_of_jobs_reads_their_links_in_two_queries_at_most(self, api, enqueue_job):
        roots = [enqueue_job() for _ in range(5)]
        for root in roots:
            enqueue_job(depends_on=[root.pk])
        with CaptureQueriesContext(connection) as linked:
            body = api.get("/api/jobs/?page_size=10").json()
        # A page without links takes 6 (test_pagination); links both ways add one query each.
        assert len(linked) <= 8
        assert {len(j["depends_on"]) + len(j["dependents"]) for j in body["results"]} == {1}


class TestUniqueFor:
    def test_a_match_within_the_period_returns_the_job_whatever_its_status_but_cancelled(self, api, set_status):
        body = {"task": ADD, "args": [1, 2], "unique_for": 3600}
        first = api.post("/api/jobs/", body, format="json")
        assert first.status_code == 201
        set_status(Job.objects.get(pk=first.json()["id"]), "failed")
        again = api.post("/api/jobs/", body, format="json")
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
        # A job that ended cancelled frees its key.
        set_status(Job.objects.get(pk=first.json()["id"]), "cancelled")
        third = api.post("/api/jobs/", body, format="json")
        assert third.status_code == 201 and third.json()["id"] != first.json()["id"]

    def test_cancelling_the_holder_frees_its_key(self, api):
        body = {"task": ADD, "args": [1, 2], "unique_for": 3600}
        first = api.post("/api/jobs/", body, format="json").json()
        assert api.post(f"/api/jobs/{first['id']}/cancel/").json()["status"] == "cancelled"
        again = api.post("/api/jobs/", body, format="json")
        assert again.status_code == 201 and again.json()["id"] != first["id"]
        bad = api.post("/api/jobs/", {**body, "unique_for": 0}, format="json")
        assert bad.json() == {
            "unique_for": [
                "Must be a number of seconds from 0.001 to 31622400, or a duration such as 90s, 2h, 3d or 1h30m."
            ]
        }


class TestQueueLimits:
    def test_patch_sets_and_clears_limits_and_get_shows_their_use(self, api, enqueue_job, set_status):
        response = api.patch(
            "/api/queues/slow/", {"concurrency_limit": 5, "rate_limit": 100, "rate_period": 60}, format="json"
        )
        assert response.status_code == 200, response.data
        body = response.json()
        assert (body["concurrency_limit"], body["rate_limit"], body["rate_period"], body["rate_used"]) == (
            5,
            100,
            60.0,
            0,
        )
        set_status(enqueue_job(queue="slow"), "running")
        shown = api.get("/api/queues/slow/").json()
        assert (shown["running"], shown["concurrency_limit"]) == (1, 5)
        cleared = api.patch("/api/queues/slow/", {"concurrency_limit": None}, format="json").json()
        assert (cleared["concurrency_limit"], cleared["rate_limit"]) == (None, 100)
        listed = {q["name"]: q for q in api.get("/api/queues/").json()}
        assert listed["slow"]["rate_limit"] == 100 and listed["default"]["rate_limit"] is None

    @pytest.mark.parametrize(
        ("body", "errors"),
        [
            ({"concurrency_limit": 0}, {"concurrency_limit": ["Must be a whole number from 1 to 100000."]}),
            ({"rate_limit": 1.5}, {"rate_limit": ["Must be a whole number from 1 to 10000."]}),
            ({"rate_period": None}, {"rate_period": ["This field may not be null."]}),
            (
                {"rate_period": 0},
                {
                    "rate_period": [
                        "Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."
                    ]
                },
            ),
            # Positive, but a window of nothing: 5e-324 rounds to zero against a time.
            (
                {"rate_period": 5e-324},
                {
                    "rate_period": [
                        "Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."
                    ]
                },
            ),
            (
                {"rate_period": 0.0009},
                {
                    "rate_period": [
                        "Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."
                    ]
                },
            ),
            (
                {"paused": True},
                {"paused": ["Cannot be changed: a PATCH may only set concurrency_limit, rate_limit and rate_period."]},
            ),
            ({}, {"non_field_errors": ["Give concurrency_limit, rate_limit or rate_period."]}),
        ],
    )
    def test_bad_limits_are_400s_and_change_nothing(self, api, body, errors):
        response = api.patch("/api/queues/slow/", body, format="json")
        assert response.status_code == 400
        assert response.json() == errors
        assert not Queue.objects.filter(name="slow", concurrency_limit__isnull=False).exists()

    def test_an_unknown_queue_is_a_404(self, api):
        assert api.patch("/api/queues/nope/", {"concurrency_limit": 1}, format="json").status_code == 404
        assert api.get("/api/queues/nope/").json() == {"detail": "Unknown queue 'nope'. GET /api/queues/ lists them."}
