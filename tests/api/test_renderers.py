"""Text no UTF-8 can hold (lone surrogates) anywhere in a request: a 400 that renders, never a 500."""

import json

import pytest

from scheduler_app import schedules
from scheduler_app.api.renderers import SafeJSONRenderer
from scheduler_app.models import Job, Schedule
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db

TASK = ADD.encode()


def test_renderer_escapes_only_what_utf8_cannot_hold():
    renderer = SafeJSONRenderer()
    assert renderer.render({"zone": "Europe/Zürich"}) == '{"zone":"Europe/Zürich"}'.encode()
    escaped = renderer.render({"\ud800": ["Unknown field."], "zone": "Zürich"})
    assert escaped == b'{"\\ud800":["Unknown field."],"zone":"Z\\u00fcrich"}'
    assert json.loads(escaped) == {"\ud800": ["Unknown field."], "zone": "Zürich"}


def test_every_api_view_uses_it(api):
    from scheduler_app.api import root, views
    from scheduler_app.api import schedules as schedule_views

    for view in (
        views.JobViewSet,
        views.TaskViewSet,
        views.WorkerViewSet,
        views.QueueViewSet,
        views.StatsView,
        schedule_views.ScheduleViewSet,
        root.APIRootView,
        root.NotFoundView,
    ):
        assert view.renderer_classes == [SafeJSONRenderer], view


def send(api, method, path, raw):
    return getattr(api, method)(path, raw, content_type="application/json")


@pytest.fixture
def targets(enqueue_job):
    job = enqueue_job()
    schedule = schedules.create(name="nightly", task=ADD, args=[1, 2], cron="0 2 * * *")
    return {"job": job.pk, "schedule": schedule.pk}


@pytest.mark.parametrize(
    "method, path, raw, field",
    [
        ("post", "/api/jobs/", b'{"\\ud800": 1, "task": "%s"}' % TASK, "\ud800"),
        ("post", "/api/jobs/", b'{"task": "\\ud800"}', "task"),
        ("post", "/api/jobs/", b'{"task": "%s", "queue": "\\ud800"}' % TASK, "queue"),
        ("post", "/api/jobs/", b'{"task": "%s", "args": ["\\ud800"]}' % TASK, "args"),
        ("post", "/api/jobs/", b'{"task": "%s", "args": [{"\\udc00": 1}]}' % TASK, "args"),
        ("post", "/api/jobs/", b'{"task": "%s", "kwargs": {"\\ud800": 1}}' % TASK, "kwargs"),
        ("post", "/api/jobs/", b'{"task": "%s", "unique_key": "\\udfff"}' % TASK, "unique_key"),
        ("post", "/api/jobs/bulk/", b'{"jobs": [{"task": "\\ud800", "\\ud801": 2}]}', "jobs"),
        ("post", "/api/jobs/bulk/", b'{"jobs": [{"task": "%s"}], "\\ud802": 1}' % TASK, "\ud802"),
        ("patch", "/api/jobs/{job}/", b'{"\\ud800": 1}', "\ud800"),
        ("post", "/api/schedules/", b'{"name": "x", "task": "%s", "cron": "0 * * * *", "\\ud800": 1}' % TASK, "\ud800"),
        ("post", "/api/schedules/", b'{"name": "\\ud800", "task": "%s", "cron": "0 * * * *"}' % TASK, "name"),
        ("patch", "/api/schedules/{schedule}/", b'{"cron": "\\ud800"}', "cron"),
        ("patch", "/api/schedules/{schedule}/", b'{"timezone": "\\ud800"}', "timezone"),
        ("put", "/api/schedules/{schedule}/", b'{"\\ud800": "\\ud800"}', "\ud800"),
    ],
)
def test_a_lone_surrogate_is_a_400_that_renders(api, targets, method, path, raw, field):
    before = (list(Job.objects.values()), list(Schedule.objects.values()))
    response = send(api, method, path.format(**targets), raw)
    assert response.status_code == 400
    assert field in json.loads(response.content)
    assert (list(Job.objects.values()), list(Schedule.objects.values())) == before


def test_an_echoed_surrogate_key_comes_back_as_sent(api):
    response = send(api, "post", "/api/jobs/", b'{"\\ud800": 1, "task": "%s"}' % TASK)
    assert b'"\\ud800":["Unknown field."]' in response.content


def test_keys_of_any_kind_are_named(api):
    raw = b'{"task": "%s", "": 1, "\\u0000": 2, "non_field_errors": 3, "%s": 4}' % (TASK, b"k" * 10_000)
    response = send(api, "post", "/api/jobs/", raw)
    assert response.status_code == 400
    assert set(response.json()) == {"", "\x00", "non_field_errors", "k" * 10_000}
