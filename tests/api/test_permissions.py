"""Who may call what: staff with the model permission each action needs, on every endpoint.

One table (ENDPOINTS) says what every method of every path needs; each
test walks it: anonymous 401, non-staff 403 (whatever their permissions),
staff without the permission 403 with nothing changed, staff with exactly
that permission served, superusers served.
"""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler_app import schedules
from scheduler_app.lifecycle.workflows import create_workflow
from scheduler_app.models import Job, Queue, Schedule, Workflow
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

SCHEDULE = {"name": "nightly", "task": ADD, "args": [1, 2], "cron": "0 2 * * *"}

# (method, path, body, the permission it needs; None: any staff user)
ENDPOINTS = [
    ("get", "/api/", None, None),
    ("get", "/api/schema/", None, None),
    ("get", "/api/docs/", None, None),
    ("get", "/api/jobs/", None, "view_job"),
    ("post", "/api/jobs/", {"task": ADD, "args": [1, 2]}, "add_job"),
    ("post", "/api/jobs/bulk/", {"jobs": [{"task": ADD, "args": [1, 2]}]}, "add_job"),
    ("get", "/api/jobs/{pending}/", None, "view_job"),
    ("patch", "/api/jobs/{pending}/", {"priority": 7}, "change_job"),
    ("post", "/api/jobs/{pending}/cancel/", None, "change_job"),
    ("post", "/api/jobs/{failed}/retry/", None, "change_job"),
    ("post", "/api/jobs/cancel/", {"filter": {"status": "pending"}}, "change_job"),
    ("post", "/api/jobs/retry/", {"filter": {"status": "failed"}}, "change_job"),
    ("get", "/api/tasks/", None, "view_job"),
    ("get", "/api/stats/", None, "view_job"),
    ("get", "/api/stats/history/", None, "view_job"),
    ("get", "/api/jobs/{failed}/logs/", None, "view_job"),
    ("get", "/api/workers/", None, "view_worker"),
    ("get", "/api/queues/", None, "view_queue"),
    ("get", "/api/queues/slow/", None, "view_queue"),
    ("patch", "/api/queues/slow/", {"concurrency_limit": 3}, "change_queue"),
    ("post", "/api/queues/slow/pause/", None, "change_queue"),
    ("post", "/api/queues/slow/resume/", None, "change_queue"),
    ("get", "/api/schedules/", None, "view_schedule"),
    ("post", "/api/schedules/", {**SCHEDULE, "name": "weekly"}, "add_schedule"),
    ("get", "/api/schedules/{schedule}/", None, "view_schedule"),
    ("put", "/api/schedules/{schedule}/", {**SCHEDULE, "name": "renamed"}, "change_schedule"),
    ("patch", "/api/schedules/{schedule}/", {"priority": 5}, "change_schedule"),
    ("delete", "/api/schedules/{schedule}/", None, "delete_schedule"),
    ("post", "/api/schedules/{schedule}/run/", None, "change_schedule"),
    ("get", "/api/workflows/", None, "view_workflow"),
    ("post", "/api/workflows/", {"name": "w", "jobs": [{"task": ADD, "args": [1, 2]}]}, "add_workflow"),
    ("get", "/api/workflows/{workflow}/", None, "view_workflow"),
    ("post", "/api/workflows/{workflow}/retry/", None, "change_workflow"),
    ("post", "/api/workflows/{workflow}/cancel/", None, "change_workflow"),
    ("get", "/api/audit/", None, "view_auditevent"),
    ("get", "/api/schedules/{schedule}/next/", None, "view_schedule"),
]
NEEDING_A_PERMISSION = [e for e in ENDPOINTS if e[3]]


def endpoint_id(endpoint):
    return f"{endpoint[0].upper()} {endpoint[1]}"


@pytest.fixture
def world(enqueue_job, set_status):
    """A pending job (with a secret-looking key), a failed job and a schedule; the ids by name."""
    pending = enqueue_job(unique_key="secret-key")
    failed = set_status(enqueue_job(), "failed")
    schedule = schedules.create(**SCHEDULE)
    workflow, _ = create_workflow([{"task": ADD, "args": [1, 2]}], name="w")
    return {"pending": pending.pk, "failed": failed.pk, "schedule": schedule.pk, "workflow": workflow.pk}


def snapshot():
    """Return every row the API can change."""
    return [list(model.objects.order_by("pk").values()) for model in (Job, Schedule, Queue, Workflow)]


def client_of(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def call(client, endpoint, world):
    method, path, body, _ = endpoint
    return getattr(client, method)(path.format(**world), body, format="json")


def make_staff(username="clerk"):
    return get_user_model().objects.create_user(username, f"{username}@example.com", "pw-123-clerk", is_staff=True)


def test_the_table_covers_every_operation_of_the_schema(api):
    schema = api.get("/api/schema/?format=json").json()
    operations = {(m, p) for p, item in schema["paths"].items() for m in item}
    table = {
        (
            method,
            path.replace("{pending}", "{id}")
            .replace("{failed}", "{id}")
            .replace("{schedule}", "{id}")
            .replace("{workflow}", "{id}")
            .replace("/slow/", "/{name}/"),
        )
        for method, path, _, _ in ENDPOINTS
    }
    assert table - {("get", "/api/schema/"), ("get", "/api/docs/")} == operations


def test_each_operation_of_the_schema_says_the_permission_it_needs(api):
    schema = api.get("/api/schema/?format=json").json()
    for method, path, _, permission in ENDPOINTS:
        if path in ("/api/schema/", "/api/docs/"):
            continue
        path = re.sub(r"\{\w+\}", "{id}", path).replace("/slow/", "/{name}/")
        operation = schema["paths"][path][method]
        sentence = f"Needs the scheduler_app.{permission} permission." if permission else "Needs a staff user"
        assert sentence in operation["description"], (method, path)


def test_staff_without_permissions_can_neither_create_nor_pause(world):
    """The issue's example: 201 on POST /api/jobs/ and 200 on a pause, for staff with no permission."""
    client = client_of(make_staff())
    before = snapshot()
    assert client.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json").status_code == 403
    assert client.post("/api/queues/slow/pause/").status_code == 403
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_anonymous_gets_401(anon, world, endpoint):
    before = snapshot()
    response = call(anon, endpoint, world)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert b"secret-key" not in response.content and ADD.encode() not in response.content
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_a_bad_token_gets_401(world, endpoint):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    before = snapshot()
    assert call(client, endpoint, world).status_code == 401
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_non_staff_gets_403_even_with_every_permission(plain_user, world, endpoint):
    grant(plain_user)
    before = snapshot()
    response = call(client_of(plain_user), endpoint, world)
    assert response.status_code == 403
    assert b"secret-key" not in response.content and ADD.encode() not in response.content
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", NEEDING_A_PERMISSION, ids=endpoint_id)
def test_staff_with_every_other_permission_gets_403_and_nothing_changes(world, endpoint):
    staff = make_staff()
    grant(staff)
    staff.user_permissions.remove(Permission.objects.get(content_type__app_label="scheduler_app", codename=endpoint[3]))
    before = snapshot()
    response = call(client_of(staff), endpoint, world)
    assert response.status_code == 403, response.content
    assert response.json() == {"detail": "You do not have permission to perform this action."}
    assert snapshot() == before


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_staff_with_exactly_the_permission_is_served(world, endpoint):
    staff = make_staff()
    if endpoint[3]:
        grant(staff, f"scheduler_app.{endpoint[3]}")
    response = call(client_of(staff), endpoint, world)
    assert response.status_code in {200, 201, 204}, response.content[:300]


@pytest.mark.parametrize("endpoint", NEEDING_A_PERMISSION, ids=endpoint_id)
def test_a_permission_given_through_a_group_counts(world, endpoint):
    staff = make_staff()
    group = Group.objects.create(name="operators")
    group.permissions.add(Permission.objects.get(content_type__app_label="scheduler_app", codename=endpoint[3]))
    staff.groups.add(group)
    assert call(client_of(staff), endpoint, world).status_code in {200, 201, 204}


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_superuser_is_served_everywhere(superuser, world, endpoint):
    response = call(client_of(superuser), endpoint, world)
    assert response.status_code in {200, 201, 204}, response.content[:300]


def test_permission_is_checked_before_existence(world):
    """Staff without view_job learn nothing about which ids exist; without change_queue, which queues."""
    staff = make_staff()
    grant(staff, "scheduler_app.view_queue")
    client = client_of(staff)
    assert client.get("/api/jobs/424242/").status_code == 403
    assert client.get(f"/api/jobs/{world['pending']}/").status_code == 403
    assert client.post("/api/queues/nope/pause/").status_code == 403


def test_non_staff_gets_403_for_unknown_ids_and_paths(non_staff):
    assert non_staff.get("/api/jobs/424242/").status_code == 403
    assert non_staff.post("/api/queues/nope/pause/").status_code == 403
    assert non_staff.get("/api/nope/").status_code == 403


def test_inactive_staff_token_is_refused(staff_user):
    grant(staff_user)
    client = client_of(staff_user)
    staff_user.is_active = False
    staff_user.save()
    assert client.get("/api/jobs/").status_code == 401


def test_staff_who_loses_the_flag_loses_the_api(staff_user):
    grant(staff_user)
    client = client_of(staff_user)
    assert client.get("/api/jobs/").status_code == 200
    staff_user.is_staff = False
    staff_user.save()
    assert client.get("/api/jobs/").status_code == 403


def test_session_authentication_requires_csrf(staff_user, world):
    grant(staff_user)
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="staff", password="pw-staff-123")
    assert client.get("/api/jobs/").status_code == 200
    refused = client.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert Job.objects.count() == 3  # the world's: nothing added

    token = "t" * 32  # a CSRF secret as the cookie holds it; the header must match
    client.cookies["csrftoken"] = token
    accepted = client.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201
    assert accepted.json()["created_by"] == "staff"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=endpoint_id)
def test_session_of_a_non_staff_user_is_403(plain_user, world, endpoint):
    client = APIClient()
    client.force_login(plain_user)
    before = snapshot()
    assert call(client, endpoint, world).status_code == 403
    assert snapshot() == before


def test_drf_create_token_command_gives_a_working_token(staff_user, capsys):
    grant(staff_user, "scheduler_app.view_job")
    call_command("drf_create_token", "staff")
    key = Token.objects.get(user=staff_user).key
    assert key in capsys.readouterr().out
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/stats/").status_code == 200


def test_every_action_of_every_view_declares_its_permissions():
    """A view action missing from required_permissions is closed to everyone but superusers; say so here."""
    from django.urls import get_resolver

    from scheduler_app.api.permissions import ANY

    missing = []
    for pattern in get_resolver().url_patterns:
        for sub in getattr(pattern, "url_patterns", []):
            callback = getattr(sub, "callback", None)
            cls = getattr(callback, "cls", None)
            if cls is None or getattr(pattern, "app_name", None) != "api":
                continue
            declared = getattr(cls, "required_permissions", {})
            actions = getattr(callback, "actions", None)
            names = set(actions.values()) if actions else {m for m in cls.http_method_names if hasattr(cls, m)}
            names -= {"head", "options"}
            if ANY not in declared:
                missing += [f"{cls.__name__}.{name}" for name in names if name not in declared]
    assert missing == []
