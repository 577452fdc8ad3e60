"""Create jobs through the API, run them with `rundispatcher --burst`, read the outcome back."""

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_run_and_read_back(api):
    created = api.post("/api/jobs/", {"task": "tests.testapp.tasks.add", "args": [20, 22]}, format="json")
    assert created.status_code == 201
    failing = api.post(
        "/api/jobs/",
        {"task": "tests.testapp.tasks.boom", "kwargs": {"message": "no"}, "max_attempts": 1},
        format="json",
    )
    later = api.post("/api/jobs/", {"task": "tests.testapp.tasks.add", "args": [1, 1], "delay": 3600}, format="json")

    call_command("rundispatcher", "--burst")

    job = api.get(created.json()["url"]).json()
    assert (job["status"], job["result"], job["attempts"]) == ("succeeded", 42, 1)
    assert job["started_at"] and job["finished_at"] and job["worker"]
    assert job["last_attempted_at"] == job["started_at"]  # one attempt: both are its start

    failed = api.get(failing.json()["url"]).json()
    assert failed["status"] == "failed"
    assert failed["errors"][0]["message"] == "no"
    assert failed["errors"][0]["exception_class"] == "builtins.ValueError"

    assert api.get(later.json()["url"]).json()["status"] == "pending"

    stats = api.get("/api/stats/").json()
    assert stats["jobs"]["succeeded"] == 1 and stats["jobs"]["failed"] == 1
    assert stats["throughput"]["last_minute"] == 2

    # Retry the failed one through the API; the dispatcher runs it again.
    assert api.post(f"/api/jobs/{failed['id']}/retry/").json()["status"] == "pending"
    call_command("rundispatcher", "--burst")
    again = api.get(failing.json()["url"]).json()
    assert again["status"] == "failed" and len(again["errors"]) == 2

    workers = api.get("/api/workers/").json()
    assert workers["count"] >= 1


def test_paused_queue_is_not_run_until_resumed(api):
    job = api.post("/api/jobs/", {"task": "tests.testapp.tasks.add", "args": [2, 3]}, format="json").json()
    assert api.post("/api/queues/default/pause/").status_code == 200
    call_command("rundispatcher", "--burst")
    assert api.get(job["url"]).json()["status"] == "pending"
    assert api.post("/api/queues/default/resume/").status_code == 200
    call_command("rundispatcher", "--burst")
    body = api.get(job["url"]).json()
    assert (body["status"], body["result"]) == ("succeeded", 5)


@pytest.mark.django_db(transaction=True)
def test_create_under_a_real_wsgi_server_sets_a_plain_location_header(live_server, staff_user):
    """wsgiref (runserver) rejects header values that are str subclasses: a 500 before the fix."""
    import json
    import urllib.request

    from rest_framework.authtoken.models import Token

    from tests.plumbing import grant

    grant(staff_user, "scheduler_app.add_job")
    token = Token.objects.create(user=staff_user)
    request = urllib.request.Request(
        f"{live_server.url}/api/jobs/",
        data=json.dumps({"task": "tests.testapp.tasks.add", "args": [1, 2]}).encode(),
        headers={"Authorization": f"Token {token.key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        assert response.headers["Location"].endswith(f"/api/jobs/{json.load(response)['id']}/")
