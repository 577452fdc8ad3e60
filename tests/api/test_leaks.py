"""What the API gives away: a held unique key, the size of a job's values, the commands a job may run.

The issue's examples: a user who may add jobs but not view them posted
another user's unique_key and got that job back in full (secret kwargs
included); 20 jobs with 2.5 MB arguments made a 100 MB list page; a user
with add_job ran run_command("purgejobs") and deleted all history.
"""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

NOOP = "tests.testapp.tasks.noop"
SECRET = {"salary": "hunter2-secret"}  # not a FILTER_ARGUMENTS name: shown whole to who may see the job


def client_with(*permissions, username="clerk"):
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "pw-123-clerk", is_staff=True)
    grant(user, *permissions)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def adder():
    return client_with("scheduler_app.add_job")


@pytest.fixture
def secret_job():
    """Another user's job: a key someone can guess, kwargs nobody else may read."""
    job, _ = lifecycle.enqueue(NOOP, [], SECRET, unique_key="payroll-2026")
    return job


class TestAHeldKeyGivesTheIdOnly:
    def test_a_user_without_view_job_gets_the_id_only(self, adder, secret_job):
        response = adder.post("/api/jobs/", {"task": NOOP, "unique_key": "payroll-2026"}, format="json")
        assert response.status_code == 200
        assert response.json() == {"id": secret_job.pk, "duplicate": True}
        assert b"hunter2" not in response.content
        assert Job.objects.count() == 1

    def test_a_key_held_by_a_window_gives_the_id_only_too(self, adder):
        held, _ = lifecycle.enqueue(NOOP, [], SECRET, unique_key="w", unique_for=3600)
        Job.objects.filter(pk=held.pk).update(status="succeeded")
        response = adder.post("/api/jobs/", {"task": NOOP, "unique_key": "w", "unique_for": 60}, format="json")
        assert (response.status_code, response.json()) == (200, {"id": held.pk, "duplicate": True})

    def test_a_user_with_view_job_gets_the_job(self, secret_job):
        client = client_with("scheduler_app.add_job", "scheduler_app.view_job")
        response = client.post("/api/jobs/", {"task": NOOP, "unique_key": "payroll-2026"}, format="json")
        assert response.status_code == 200
        body = response.json()
        assert body["id"] == secret_job.pk and body["kwargs"] == SECRET and "duplicate" not in body

    def test_a_new_job_is_shown_whole_to_who_made_it(self, adder):
        response = adder.post("/api/jobs/", {"task": NOOP, "kwargs": SECRET, "unique_key": "mine"}, format="json")
        assert response.status_code == 201 and response.json()["kwargs"] == SECRET

    def test_bulk_gives_the_id_only_for_held_keys(self, adder, secret_job):
        jobs = [{"task": NOOP, "unique_key": "payroll-2026"}, {"task": NOOP, "kwargs": {"x": 1}}]
        response = adder.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 201
        held, new = response.json()
        assert held == {"id": secret_job.pk, "duplicate": True}
        assert new["kwargs"] == {"x": 1} and new["id"] != secret_job.pk
        assert b"hunter2" not in response.content

    def test_bulk_shows_held_jobs_whole_to_who_may_view_them(self, secret_job):
        client = client_with("scheduler_app.add_job", "scheduler_app.view_job")
        jobs = [{"task": NOOP, "unique_key": "payroll-2026"}, {"task": NOOP}]
        held, new = client.post("/api/jobs/bulk/", {"jobs": jobs}, format="json").json()
        assert held["kwargs"] == SECRET and "duplicate" not in held and new["id"] not in (None, secret_job.pk)

    def test_the_schema_describes_both_answers(self, api):
        schema = api.get("/api/schema/?format=json").json()
        create = schema["paths"]["/api/jobs/"]["post"]["responses"]
        either = {"$ref": "#/components/schemas/JobOrDuplicate"}
        assert create["200"]["content"]["application/json"]["schema"] == either
        assert "view_job" in create["200"]["description"]
        bulk = schema["paths"]["/api/jobs/bulk/"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
        assert bulk == {"type": "array", "items": either}
        shapes = schema["components"]["schemas"]
        assert shapes["JobOrDuplicate"]["oneOf"] == [
            {"$ref": "#/components/schemas/Job"},
            {"$ref": "#/components/schemas/Duplicate"},
        ]
        assert shapes["Duplicate"]["required"] == ["duplicate", "id"]


class TestArgumentsAreBounded:
    """SCHEDULER["ARGS_MAX_BYTES"] (1 MiB): args and kwargs together, as compact UTF-8 JSON."""

    def test_over_the_limit_is_a_400_on_the_field_and_creates_nothing(self, api):
        big = "x" * (1024 * 1024)  # with its quotes, the brackets and kwargs' {}: 6 bytes over
        response = api.post("/api/jobs/", {"task": NOOP, "args": [big]}, format="json")
        assert response.status_code == 400
        assert response.json() == {
            "args": [
                "The arguments take 1,048,582 bytes as JSON (args and kwargs together); "
                'at most 1,048,576 (SCHEDULER["ARGS_MAX_BYTES"]).'
            ]
        }
        assert not Job.objects.exists()

    def test_args_and_kwargs_count_together(self, api):
        half = "y" * (600 * 1024)
        response = api.post("/api/jobs/", {"task": NOOP, "args": [half], "kwargs": {"a": half + "z"}}, format="json")
        assert response.status_code == 400 and list(response.json()) == ["kwargs"]
        assert api.post("/api/jobs/", {"task": NOOP, "args": [half]}, format="json").status_code == 201

    def test_the_bytes_are_utf8(self, api):
        emoji = "😀" * (256 * 1024)  # 4 bytes each: 1 MiB, and 6 bytes of JSON around them
        response = api.post("/api/jobs/", {"task": NOOP, "args": [emoji]}, format="json")
        assert response.status_code == 400 and "1,048,582 bytes" in response.json()["args"][0]

    @override_settings(SCHEDULER={"ARGS_MAX_BYTES": 1024})
    def test_the_setting_and_bulk(self, api):
        jobs = [{"task": NOOP, "args": ["a" * 100]}, {"task": NOOP, "kwargs": {"k": "b" * 1100}}]
        response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400
        assert list(response.json()["jobs"]) == ["1"] and "at most 1,024" in response.json()["jobs"]["1"]["kwargs"][0]
        assert not Job.objects.exists()


def big_job(size, **extra):
    job, _ = lifecycle.enqueue(NOOP, ["a" * size], {"k": "é" * size}, **extra)
    Job.objects.filter(pk=job.pk).update(status="succeeded", result={"out": "€" * size})
    return job


class TestTheListIsBounded:
    def test_big_values_are_cut_to_4_kib_and_marked(self, api):
        big = big_job(100_000)
        small, _ = lifecycle.enqueue(ADD, [1, 2])
        listed = {j["id"]: j for j in api.get("/api/jobs/").json()["results"]}
        entry = listed[big.pk]
        assert entry["truncated"] == ["args", "kwargs", "result"]
        for name in ("args", "kwargs", "result"):
            assert isinstance(entry[name], str) and len(entry[name].encode()) <= 4096
            assert len(entry[name].encode()) > 4000  # cut at a character boundary, not short of it
        assert entry["args"].startswith('["aaa')
        assert listed[small.pk]["truncated"] == [] and listed[small.pk]["args"] == [1, 2]
        assert listed[small.pk]["kwargs"] == {} and listed[small.pk]["result"] is None

    def test_the_job_itself_is_whole(self, api):
        big = big_job(100_000)
        body = api.get(f"/api/jobs/{big.pk}/").json()
        assert body["args"] == ["a" * 100_000] and body["kwargs"] == {"k": "é" * 100_000}
        assert body["result"] == {"out": "€" * 100_000} and body["truncated"] == []

    def test_a_value_that_fits_is_left_alone(self, api):
        fits, _ = lifecycle.enqueue(NOOP, ["a" * 4000])
        [entry] = api.get("/api/jobs/").json()["results"]
        assert entry["id"] == fits.pk and entry["args"] == ["a" * 4000] and entry["truncated"] == []

    def test_twenty_jobs_of_a_megabyte_make_a_small_page(self, api):
        """The issue's 100 MB page: now at most 4 KiB per value."""
        for _ in range(20):
            lifecycle.enqueue(NOOP, ["z" * (1000 * 1024)])
        response = api.get("/api/jobs/?page_size=20")
        page = response.json()["results"]
        assert len(page) == 20 and all(j["truncated"] == ["args"] for j in page)
        assert len(response.content) < 20 * 8 * 1024

    def test_the_list_reads_no_more_of_a_value_than_it_shows(self, api):
        big_job(300_000)
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            api.get("/api/jobs/")
        listing = next(q["sql"] for q in queries if 'FROM "scheduler_app_job"' in q["sql"] and "LIMIT" in q["sql"])
        assert '"scheduler_app_job"."args",' not in listing and '"scheduler_app_job"."result",' not in listing


class TestRunCommand:
    def test_purgejobs_is_refused_when_the_job_is_made(self, adder, secret_job):
        response = adder.post(
            "/api/jobs/", {"task": "scheduler_app.tasks.run_command", "args": ["purgejobs"]}, format="json"
        )
        assert response.status_code == 400
        assert response.json() == {
            "args": [
                "Command 'purgejobs' is not allowed: run_command runs only the commands "
                'SCHEDULER["RUN_COMMAND_ALLOWED"] lists (none).'
            ]
        }
        assert list(Job.objects.values_list("pk", flat=True)) == [secret_job.pk]

    def test_the_name_as_a_keyword_is_refused_on_kwargs(self, adder):
        response = adder.post(
            "/api/jobs/", {"task": "scheduler_app.tasks.run_command", "kwargs": {"name": "flush"}}, format="json"
        )
        assert response.status_code == 400 and "RUN_COMMAND_ALLOWED" in response.json()["kwargs"][0]

    def test_bulk_is_refused_by_index(self, adder):
        jobs = [{"task": NOOP}, {"task": "scheduler_app.tasks.run_command", "args": ["purgejobs", "--older-than", "0"]}]
        response = adder.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")
        assert response.status_code == 400 and list(response.json()["jobs"]) == ["1"]
        assert not Job.objects.exists()

    @override_settings(SCHEDULER={"RUN_COMMAND_ALLOWED": ["clearsessions"]})
    def test_an_allowed_command_is_accepted(self, adder):
        response = adder.post(
            "/api/jobs/", {"task": "scheduler_app.tasks.run_command", "args": ["clearsessions"]}, format="json"
        )
        assert response.status_code == 201, response.json()
        refused = adder.post(
            "/api/jobs/", {"task": "scheduler_app.tasks.run_command", "args": ["purgejobs"]}, format="json"
        )
        assert refused.status_code == 400 and "(clearsessions)" in json.dumps(refused.json())
