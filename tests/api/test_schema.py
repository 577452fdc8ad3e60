"""The OpenAPI schema, Swagger UI without a CDN, and a schemathesis run against them.

The run is the CLI's ``--checks all`` in the Python API: every check
(server errors, response schema, status codes and content types the schema
declares, valid data accepted, invalid data refused, unsupported methods),
NUL bytes in generated strings, the examples, coverage and fuzzing phases,
as a superuser. The only allowance: a 400 for schema-valid data whose rule
a JSON schema cannot state (STATEABLE_ONLY_IN_WORDS), which the API
documents.
"""

import json
import re

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

from scheduler_app import schedules
from tests.plumbing import ADD

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
    ("post", "/api/jobs/cancel/"),
    ("post", "/api/jobs/retry/"),
    ("get", "/api/tasks/"),
    ("get", "/api/workers/"),
    ("get", "/api/queues/"),
    ("get", "/api/queues/{name}/"),
    ("patch", "/api/queues/{name}/"),
    ("post", "/api/queues/{name}/pause/"),
    ("post", "/api/queues/{name}/resume/"),
    ("get", "/api/stats/"),
    ("get", "/api/stats/history/"),
    ("get", "/api/jobs/{id}/logs/"),
    ("get", "/api/schedules/"),
    ("post", "/api/schedules/"),
    ("get", "/api/schedules/{id}/"),
    ("put", "/api/schedules/{id}/"),
    ("patch", "/api/schedules/{id}/"),
    ("delete", "/api/schedules/{id}/"),
    ("post", "/api/schedules/{id}/run/"),
    ("get", "/api/workflows/"),
    ("post", "/api/workflows/"),
    ("get", "/api/workflows/{id}/"),
    ("post", "/api/workflows/{id}/retry/"),
    ("post", "/api/workflows/{id}/cancel/"),
    ("get", "/api/schedules/{id}/next/"),
    ("get", "/api/audit/"),
}


def test_schema_is_valid_openapi_3_without_warnings():
    """What ``manage.py spectacular --validate --fail-on-warn`` checks, without drf_spectacular
    among the project's apps (the scheduler does not ask projects to install it)."""
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.validation import validate_schema

    GENERATOR_STATS.reset()
    schema = served_schema()
    assert not GENERATOR_STATS, "drf-spectacular warned while generating the schema"
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    operations = {(m, p) for p, item in schema["paths"].items() for m in item}
    assert operations == EXPECTED_OPERATIONS


def test_schema_is_served_to_staff(api):
    response = api.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    params = {p["name"] for p in schema["paths"]["/api/jobs/"]["get"]["parameters"]}
    assert params == {
        "status",
        "queue",
        "task",
        "priority_min",
        "priority_max",
        "execute_after",
        "execute_before",
        "depends_on",
        "schedule",
        "search",
        "ordering",
        "page",
        "page_size",
        "tag",
        "created_after",
        "created_before",
        "finished_after",
        "finished_before",
    }
    task_enum = schema["components"]["schemas"]["JobCreate"]["properties"]["task"]
    assert "tests.testapp.tasks.add" in str(task_enum) or "TaskEnum" in str(task_enum)


def test_swagger_ui_is_served_without_a_cdn(api, staff_user):
    api.force_authenticate(staff_user)  # the HTML page is what a browser session gets
    response = api.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "/static/scheduler_app/swagger-ui/swagger-ui-bundle.js" in html
    from django.contrib.staticfiles import finders

    # Shipped inside the app: no extra installed app, no CDN.
    for name in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
        assert finders.find(f"scheduler_app/swagger-ui/{name}"), name
    external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
    assert external == []
    assert "cdn" not in html.lower()


# --- Fuzzing ---------------------------------------------------------------


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
    from drf_spectacular.settings import patched_settings

    from scheduler_app.api.root import SCHEMA_SETTINGS

    with patched_settings(SCHEMA_SETTINGS):
        generator = SchemaGenerator()
        return json.loads(OpenApiJsonRenderer().render(generator.get_schema(request=None, public=True)))


SCHEMA = served_schema()
# Every check schemathesis has (the CLI's --checks all), NUL bytes in
# generated strings, valid and invalid data, all phases but the stateful one.
FUZZ_CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {"allow-x00": True, "mode": "all", "deterministic": True},
        "phases": {"stateful": {"enabled": False}},
    }
)
schema = schemathesis.openapi.from_dict(SCHEMA, config=FUZZ_CONFIG)
schema.app = get_wsgi_application()


def test_every_operation_declares_the_errors_it_shares_and_the_permission_it_needs():
    for path, item in SCHEMA["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert {"401", "403", "406"} <= codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
            if "requestBody" in operation:
                assert {"400", "413", "415"} <= codes, (method, path)
            assert "Needs " in operation["description"], (method, path)
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "id":
                    assert parameter["schema"] == {"type": "integer"}, (method, path)
            for code, response in operation["responses"].items():
                if code >= "400":
                    assert "application/json" in response["content"], (method, path, code)


def test_fuzzed_schema_is_the_served_one(api):
    assert api.get("/api/schema/?format=json").json() == SCHEMA


@pytest.fixture
def fuzz_token(superuser):
    return Token.objects.create(user=superuser).key


@pytest.fixture
def seeded(enqueue_job, set_status):
    """Jobs in each state and a schedule, so that generated ids sometimes exist."""
    jobs = [set_status(enqueue_job(), s) for s in ("pending", "running", "failed", "succeeded")]
    schedule = schedules.create(name="seeded", task=ADD, args=[1, 2], cron="0 2 * * *")
    return jobs, schedule


# Rules a JSON schema cannot state: a 400 for schema-valid data is allowed
# when every message it gives is one of these (field, start of message).
STATEABLE_ONLY_IN_WORDS = [
    # One field against another (null counts as not given; a PATCH against the stored schedule).
    ("delay", "Give either execute_at or delay, not both."),
    ("non_field_errors", "Give either a cron expression or an interval, not both."),
    ("non_field_errors", "Give a cron expression or an interval in seconds."),
    ("end_at", "Must be after start_at."),
    ("expires_in", "Give either expires_in or expires_at, not both."),
    ("concurrency_limit", "concurrency_limit needs a concurrency_key."),
    # The database's state.
    ("name", "A schedule named "),
    ("unique_key", "Same unique_key as job "),  # one item of a bulk request against another
    ("depends_on", "No job has the id "),
    # One item of a bulk request against the others: an index outside it, itself, a cycle.
    ("depends_on_index", "No job "),
    ("depends_on_index", "A job cannot depend on itself."),
    ("depends_on_index", "Jobs "),
    # The task's own signature (the schema has one args and kwargs for every task).
    ("args", "The arguments do not match "),
    # A built-in task's own rule on its arguments: run_command's allow-list (a setting).
    ("args", "Command "),
    # A syntax of its own.
    ("cron", "Invalid cron expression "),
    ("cron", "The cron expression "),
    # "date-time" cannot bound the instant: the scheduler's time ends a day
    # before Python's (every zone can show it), and an offset moves one further.
    *[
        (field, f"Must be no {edge} than ")
        for field in ("execute_at", "start_at", "end_at", "expires_at")
        for edge in ("later", "earlier")
    ],
    # Anything at any depth of free JSON: the schema says "any JSON value".
    ("args", "Text may not contain NUL"),
    ("kwargs", "Text may not contain NUL"),
    ("args", "Nested more than "),
    ("kwargs", "Nested more than "),
    ("meta", "Text may not contain NUL"),
    ("meta", "Nested more than "),
    # A size in bytes of compact UTF-8 JSON.
    ("meta", "Takes "),
]


# A duration's text ("90s", "1h30m") has a syntax of its own, and its value a
# bound no pattern states: its message is allowed when the field was sent as text.
DURATION_FIELDS = {"delay", "timeout", "unique_for", "expires_in", "interval_seconds", "rate_period"}
DURATION_MESSAGE = ("Must be a number of seconds from ", "Must be a whole number of seconds from ")


def text_fields(body):
    """Return the keys that hold text anywhere in a request body."""
    found = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if isinstance(value, str):
                found.add(key)
            found |= text_fields(value)
    elif isinstance(body, list):
        for item in body:
            found |= text_fields(item)
    return found


# A workflow's callbacks answer with their job's field errors as "field: message" (lifecycle.workflows.check_callbacks).
CALLBACK_KEYS = {"on_success", "on_failure", "on_finish"}


def field_messages(errors, field="non_field_errors"):
    """Yield (field, message) for every message of a DRF error body, however nested."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            yield from field_messages(value, field if key.isdigit() else key)
    elif isinstance(errors, list):
        for item in errors:
            yield from field_messages(item, field)
    elif field in CALLBACK_KEYS and ": " in str(errors):
        yield tuple(str(errors).split(": ", 1))
    else:
        yield field, str(errors)


def is_stated_only_in_words(response, body=None):
    if response.status_code != 400:
        return False
    pairs = list(field_messages(response.json()))
    words = [*STATEABLE_ONLY_IN_WORDS, *((f, DURATION_MESSAGE) for f in DURATION_FIELDS & text_fields(body))]
    return bool(pairs) and all(any(field == f and message.startswith(m) for f, m in words) for field, message in pairs)


def test_only_the_listed_rules_are_allowed():
    from types import SimpleNamespace

    def response(body, status=400):
        return SimpleNamespace(status_code=status, json=lambda: body)

    assert is_stated_only_in_words(response({"cron": ["Invalid cron expression 'x': ..."]}))
    assert is_stated_only_in_words(response({"jobs": {"3": {"delay": ["Give either execute_at or delay, not both."]}}}))
    assert not is_stated_only_in_words(response({"cron": ["Invalid cron expression 'x'"], "task": ["x"]}))
    assert not is_stated_only_in_words(response({"detail": "JSON parse error - ..."}))
    assert not is_stated_only_in_words(response({}))
    assert not is_stated_only_in_words(response({"cron": ["Invalid cron expression"]}, status=409))
    # A duration's refusal only when the field was text.
    duration = {
        "delay": ["Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m."]
    }
    assert is_stated_only_in_words(response(duration), {"task": "t", "delay": "soon"})
    assert is_stated_only_in_words(response({"jobs": {"0": duration}}), {"jobs": [{"delay": "soon"}]})
    assert not is_stated_only_in_words(response(duration), {"task": "t", "delay": 5})
    # A callback's job: its field errors as "field: message".
    assert is_stated_only_in_words(response({"on_success": ["args: The arguments do not match f(a): missing"]}))
    assert not is_stated_only_in_words(response({"on_success": ["task: Unknown task 'x'."]}))


def valid_data_is_accepted_unless_a_rule_is_stated_only_in_words(ctx, response, case):
    """schemathesis's positive_data_acceptance, allowing the documented 400s above."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if is_stated_only_in_words(response, getattr(case, "body", None)):
            return None
        raise


# The operations by label ("GET /api/jobs/"). schemathesis's own parametrize()
# builds every operation's examples and coverage cases at collection, about 10 s
# of CPU in every pytest process of a run (each xdist worker collects them all);
# here each test builds its operation's hypothesis test when it runs, with the
# builder parametrize() uses, so collecting costs nothing and only the worker
# that runs a test pays for it.
OPERATIONS = {result.ok().label: result.ok() for result in schema.get_all_operations()}
FUZZ_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,  # the same examples every run, not failures replayed from .hypothesis/
    suppress_health_check=list(HealthCheck),
)


def fuzz(operation, token):
    """Run schemathesis's examples, coverage and fuzzing phases against one operation."""
    from schemathesis.checks import load_all_checks
    from schemathesis.generation.feedback import FeedbackSources
    from schemathesis.pytest._test_builder import build_operation_test
    from schemathesis.python._constants.orchestrator import make_constants_value_source

    load_all_checks()

    @FUZZ_SETTINGS
    def check(case):
        case.call_and_validate(
            headers={"Authorization": f"Token {token}"},
            excluded_checks=[positive_data_acceptance],
            additional_checks=[valid_data_is_accepted_unless_a_rule_is_stated_only_in_words],
        )

    build_operation_test(
        config=schema.config,
        operation=operation,
        test_func=check,
        given_kwargs={},
        feedback=FeedbackSources(constants_value_source=make_constants_value_source(schema)),
    )()


def test_every_operation_is_fuzzed():
    assert {tuple(label.lower().split(" ", 1)) for label in OPERATIONS} == EXPECTED_OPERATIONS


# Independent of the database: it runs in the SQLite pass only (the suite's "once").
@pytest.mark.once
@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_fuzz_finds_nothing(label, fuzz_token, seeded, wsgi_keeps_the_test_connection):
    fuzz(OPERATIONS[label], fuzz_token)


def test_the_create_example_never_sends_execute_at_and_delay_together(api):
    schema = api.get("/api/schema/?format=json").json()
    body = schema["paths"]["/api/jobs/"]["post"]["requestBody"]["content"]["application/json"]
    examples = [e["value"] for e in body["examples"].values()]
    assert examples and all(not ({"execute_at", "delay"} <= set(e)) for e in examples)
    for example in examples:  # each one is a body the API takes
        assert api.post("/api/jobs/", example, format="json").status_code == 201, example


def test_a_browser_that_is_not_signed_in_goes_to_the_admin_login_and_back(client, staff_user):
    response = client.get("/api/docs/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert response.status_code == 302 and response["Location"] == "/admin/login/?next=/api/docs/"
    login = client.post(
        "/admin/login/?next=/api/docs/", {"username": "staff", "password": "pw-staff-123", "next": "/api/docs/"}
    )
    assert login.status_code == 302 and login["Location"] == "/api/docs/"
    assert client.get("/api/docs/", HTTP_ACCEPT="text/html").status_code == 200
    # An API client (no text/html) still gets the JSON 401.
    client.logout()
    assert client.get("/api/docs/").status_code == 401
