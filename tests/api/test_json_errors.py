"""Issue 34, section 5: every error under /api/ is JSON, with DEBUG on and off.

Django refuses some requests before any view runs (a Host not in
ALLOWED_HOSTS, more than DATA_UPLOAD_MAX_NUMBER_FIELDS parameters, a body
over DATA_UPLOAD_MAX_MEMORY_SIZE), as an HTML page, and with DEBUG on its
debug page failed on the query string itself (a 500). The API's middleware
and its views answer each in JSON.
"""

import pytest
from django.test import Client, override_settings

from scheduler_app.api.views import QueueViewSet

pytestmark = pytest.mark.django_db

MANY = "&".join(f"p{i}=1" for i in range(1001))


@pytest.fixture(params=[False, True], ids=["DEBUG=False", "DEBUG=True"])
def debug(request):
    with override_settings(DEBUG=request.param):
        yield request.param


@pytest.fixture
def session(debug, superuser):
    client = Client(raise_request_exception=False)
    client.force_login(superuser)
    return client


def json_error(response, status):
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    assert response.json()["detail"]
    return response.json()["detail"]


@pytest.mark.parametrize("path", ["/api/jobs/", "/api/", "/api/queues/", "/api/no-such-thing/", "/api/stats/"])
def test_too_many_parameters(session, path):
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in json_error(session.get(f"{path}?{MANY}"), 400)


def test_a_host_not_allowed(session):
    assert "ALLOWED_HOSTS" in json_error(session.get("/api/jobs/", HTTP_HOST="evil.example"), 400)


def test_a_body_too_big(session):
    json_error(session.post("/api/jobs/", "x" * 3_000_000, content_type="application/json"), 413)


def test_a_malformed_body(session):
    json_error(session.post("/api/jobs/", "{", content_type="application/json"), 400)


def test_a_form_body_with_too_many_fields(session):
    response = session.post("/api/jobs/", MANY, content_type="application/x-www-form-urlencoded")
    assert response.status_code in (400, 415)
    json_error(response, response.status_code)


def test_an_unknown_path_and_a_method_not_allowed(session):
    json_error(session.get("/api/no-such-thing/"), 404)
    json_error(session.get("/api/jobs"), 404)
    json_error(session.delete("/api/"), 405)


def test_an_unexpected_error_is_a_json_500(session, monkeypatch):
    def boom(self, request, *args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(QueueViewSet, "list", boom)
    detail = json_error(session.get("/api/queues/"), 500)
    assert "a bug" not in detail  # no traceback, whatever DEBUG says


def test_pages_outside_the_api_keep_their_html(session):
    response = session.get(f"/admin/?{MANY}")
    assert not response["Content-Type"].startswith("application/json")
