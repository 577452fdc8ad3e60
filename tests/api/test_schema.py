"""The OpenAPI schema, Swagger UI without a CDN, and a schemathesis fuzz run against them."""

import json
import re

import pytest
import schemathesis
import yaml
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

pytestmark = pytest.mark.django_db

EXPECTED_OPERATIONS = {
    ("get", "/api/"),
    ("get", "/api/jobs/"),
    ("post", "/api/jobs/"),
    ("post", "/api/jobs/bulk/"),
    ("get", "/api/jobs/{id}/"),
    ("patch", "/api/jobs/{id}/"),
    ("post", "/api/jobs/{id}/cancel/"),
    ("post", "/api/jobs/{id}/retry/"),
    ("get", "/api/tasks/"),
    ("get", "/api/workers/"),
    ("get", "/api/queues/"),
    ("post", "/api/queues/{name}/pause/"),
    ("post", "/api/queues/{name}/resume/"),
    ("get", "/api/stats/"),
    ("get", "/api/schedules/"),
    ("post", "/api/schedules/"),
    ("get", "/api/schedules/{id}/"),
    ("put", "/api/schedules/{id}/"),
    ("patch", "/api/schedules/{id}/"),
    ("delete", "/api/schedules/{id}/"),
    ("post", "/api/schedules/{id}/run/"),
}


def test_schema_is_valid_openapi_3_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    operations = {(m, p) for p, item in schema["paths"].items() for m in item}
    assert operations == EXPECTED_OPERATIONS


def test_schema_is_served_to_staff(api):
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    params = {p["name"] for p in schema["paths"]["/api/jobs/"]["get"]["parameters"]}
    assert params == {
        "status", "queue", "task", "priority_min", "priority_max", "execute_after",
        "execute_before", "schedule", "search", "ordering", "page", "page_size",
    }
    task_enum = schema["components"]["schemas"]["JobCreate"]["properties"]["task"]
    assert "tests.testapp.tasks.add" in str(task_enum) or "TaskEnum" in str(task_enum)


def test_swagger_ui_is_served_without_a_cdn(api, staff_user):
    api.force_authenticate(staff_user)  # the HTML page is what a browser session gets
    response = api.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
    assert external == []
    assert "cdn" not in html.lower()


# --- Fuzzing ---------------------------------------------------------------


@pytest.fixture
def fuzz_token(staff_user):
    return Token.objects.create(user=staff_user).key


@pytest.fixture
def wsgi_keeps_the_test_connection():
    """Keep the WSGI handler from closing the test's database connection.

    Django's handler closes connections at request boundaries, which inside
    a test transaction means closing it; Django's test client disconnects the
    same receivers for the same reason.
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def served_schema():
    """Return the schema exactly as GET /api/schema/?format=json renders it.

    Built with the generator the view uses rather than fetched, because the
    parametrized test is collected before any database (and so any staff
    user) exists; test_fuzzed_schema_is_the_served_one checks they agree.
    (schemathesis's lazy from_fixture() loader does not work with pytest 9.)
    """
    generator = SchemaGenerator()
    return json.loads(OpenApiJsonRenderer().render(generator.get_schema(request=None, public=True)))


SCHEMA = served_schema()
schema = schemathesis.openapi.from_dict(SCHEMA)
schema.app = get_wsgi_application()


def test_fuzzed_schema_is_the_served_one(api):
    assert api.get("/api/schema/?format=json").json() == SCHEMA


@pytest.fixture
def seeded_jobs(make_job, set_status):
    """Jobs in each state, so that generated ids sometimes exist."""
    return [set_status(make_job(), s) for s in ("pending", "running", "failed", "succeeded")]


@schema.parametrize()
@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_fuzz_finds_no_server_error_and_no_schema_violation(
    case, fuzz_token, seeded_jobs, wsgi_keeps_the_test_connection
):
    case.call_and_validate(
        headers={"Authorization": f"Token {fuzz_token}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
