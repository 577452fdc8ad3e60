"""GET /api/ lists the endpoints; every other path under /api/ answers JSON, never Django's HTML page."""

import pytest

pytestmark = pytest.mark.django_db

NAMES = ["jobs", "tasks", "workers", "queues", "schedules", "workflows", "audit", "stats", "history", "schema", "docs"]


def test_root_lists_every_endpoint_with_absolute_urls(api):
    response = api.get("/api/")
    assert response.status_code == 200
    body = response.json()
    assert list(body) == NAMES
    assert body["jobs"] == "http://testserver/api/jobs/"
    for name, url in body.items():
        assert api.get(url.removeprefix("http://testserver")).status_code == 200, name


def test_root_needs_only_a_staff_user(staff_user, non_staff, anon):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff_user)  # staff, no permission at all
    assert client.get("/api/").status_code == 200
    assert non_staff.get("/api/").status_code == 403
    assert anon.get("/api/").status_code == 401


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/api/jobs/0.5/"),
        ("get", "/api/jobs/-1/"),
        ("get", "/api/jobs/1e3/"),
        ("post", "/api/jobs/0.5/cancel/"),
        ("patch", "/api/jobs/abc/"),
        ("get", "/api/schedules/0.5/"),
        ("delete", "/api/schedules/x/"),
        ("post", "/api/schedules/0.5/run/"),
        ("get", "/api/nope/"),
        ("post", "/api/nope/"),
        ("delete", "/api/nope/deeper/still/"),
        ("get", "/api/jobs/1/nope/"),
        ("get", "/api/queues/nope/"),
        ("get", "/api/nope"),
        ("post", "/api/jobs"),
        ("get", "/api/jobs/%00/"),
        ("get", "/api/%ED%A0%80/"),
    ],
)
def test_unknown_paths_and_ids_are_a_json_404(api, method, path):
    response = getattr(api, method)(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"detail"}


def test_a_missing_slash_is_named(api):
    assert "end with a slash" in api.get("/api/jobs").json()["detail"]
    assert "end with a slash" not in api.get("/api/nope/").json()["detail"]


@pytest.mark.parametrize(
    "method, path",
    [
        ("put", "/api/jobs/1/"),
        ("delete", "/api/jobs/"),
        ("post", "/api/stats/"),
        ("get", "/api/jobs/1/cancel/"),
        ("post", "/api/"),
    ],
)
def test_a_wrong_method_is_a_json_405_with_allow(api, enqueue_job, method, path):
    enqueue_job()
    response = getattr(api, method)(path)
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f'Method "{method.upper()}" not allowed.'}
    assert response["Allow"]


def test_unknown_paths_tell_nothing_to_anonymous_or_non_staff(anon, non_staff):
    assert anon.get("/api/nope/").status_code == 401
    assert non_staff.get("/api/nope/").status_code == 403
    assert anon.get("/api/jobs/0.5/").status_code == 401
