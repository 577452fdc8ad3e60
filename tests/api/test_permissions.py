"""Authentication and permissions: staff only, on every endpoint."""

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler_app.models import Job, Queue

from .conftest import ADD

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(make_job):
    return make_job(unique_key="secret-key")


def endpoints(job_id):
    """Return (method, path, body) for every endpoint of the API."""
    return [
        ("get", "/api/jobs/", None),
        ("post", "/api/jobs/", {"task": ADD, "args": [1, 2]}),
        ("post", "/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2]}]}),
        ("get", f"/api/jobs/{job_id}/", None),
        ("patch", f"/api/jobs/{job_id}/", {"priority": 7}),
        ("post", f"/api/jobs/{job_id}/cancel/", None),
        ("post", f"/api/jobs/{job_id}/retry/", None),
        ("get", "/api/tasks/", None),
        ("get", "/api/workers/", None),
        ("get", "/api/queues/", None),
        ("post", "/api/queues/default/pause/", None),
        ("post", "/api/queues/default/resume/", None),
        ("get", "/api/stats/", None),
        ("get", "/api/schema/", None),
        ("get", "/api/docs/", None),
    ]


def call(client, method, path, body):
    return getattr(client, method)(path, body, format="json")


def assert_nothing_changed(job):
    fresh = Job.objects.get(pk=job.pk)
    assert Job.objects.count() == 1
    assert (fresh.status, fresh.priority) == ("pending", job.priority)
    assert not Queue.objects.exists()


def test_anonymous_gets_401_everywhere(anon, job):
    for method, path, body in endpoints(job.pk):
        response = call(anon, method, path, body)
        assert response.status_code == 401, (method, path)
        assert response["WWW-Authenticate"] == "Token"
        assert b"secret-key" not in response.content and ADD.encode() not in response.content
    assert_nothing_changed(job)


def test_bad_token_gets_401(job):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    for method, path, body in endpoints(job.pk):
        assert call(client, method, path, body).status_code == 401, (method, path)
    assert_nothing_changed(job)


def test_non_staff_gets_403_everywhere(non_staff, job):
    for method, path, body in endpoints(job.pk):
        response = call(non_staff, method, path, body)
        assert response.status_code == 403, (method, path)
        assert b"secret-key" not in response.content and ADD.encode() not in response.content
    assert_nothing_changed(job)


def test_non_staff_gets_403_for_unknown_ids_too(non_staff):
    assert non_staff.get("/api/jobs/424242/").status_code == 403
    assert non_staff.post("/api/queues/nope/pause/").status_code == 403


def test_staff_is_served_everywhere(api, job):
    for method, path, body in endpoints(job.pk):
        response = call(api, method, path, body)
        # The job is cancelled before it is retried, so every call succeeds.
        assert response.status_code in {200, 201}, (method, path, response.content[:300])


def test_superuser_is_staff(superuser, job):
    client = APIClient()
    client.force_login(superuser)
    assert client.get("/api/jobs/").status_code == 200


def test_inactive_staff_token_is_refused(staff_user, job):
    token = Token.objects.create(user=staff_user)
    staff_user.is_active = False
    staff_user.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get("/api/jobs/").status_code == 401


def test_session_authentication_requires_csrf(staff_user, job):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="staff", password="pw-staff-123")
    assert client.get("/api/jobs/").status_code == 200
    refused = client.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert Job.objects.count() == 1

    token = "t" * 32  # a CSRF secret as the cookie holds it; the header must match
    client.cookies["csrftoken"] = token
    accepted = client.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201
    assert accepted.json()["created_by"] == "staff"


def test_session_of_a_non_staff_user_is_403(plain_user, job):
    client = APIClient()
    client.force_login(plain_user)
    for method, path, body in endpoints(job.pk):
        assert call(client, method, path, body).status_code == 403, (method, path)
    assert_nothing_changed(job)


def test_drf_create_token_command_gives_a_working_token(staff_user, capsys):
    call_command("drf_create_token", "staff")
    key = Token.objects.get(user=staff_user).key
    assert key in capsys.readouterr().out
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/stats/").status_code == 200
