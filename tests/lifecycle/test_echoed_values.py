"""Error messages that quote a user's value never carry a lone surrogate or a control character.

Such a message ends up in an HTML page (the admin) or a JSON document (the
API): a lone surrogate cannot be encoded as UTF-8 (the page or the renderer
fails with a 500) and control characters hide or forge text. The value is
echoed ``repr``-escaped and cut (``registry.shown``).
"""

import json

import pytest
from django.contrib import admin
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.http import QueryDict
from django.test import RequestFactory
from rest_framework.test import APIClient

from scheduler_app import registry, schedules
from scheduler_app.models import Job, Schedule

ADD = "tests.testapp.tasks.add"
HOSTILE = ["\ud800", "a\udfffb", "\x1b[31mred", "bell\x07", "\x00", "x" * 5000]


def is_safe(text):
    text.encode("utf-8")  # no lone surrogates
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
    assert len(text) < 400


@pytest.mark.parametrize("name", [*HOSTILE, None, 3, ["a"]])
def test_unknown_task_messages_are_safe(name):
    is_safe(str(registry.UnknownTask(name)))


def test_a_plain_name_is_quoted_as_it_is():
    assert str(registry.UnknownTask("os.system")).startswith("'os.system' is not a registered task.")


def post_as_form_data(superuser, model_admin, data):
    """Call an admin add view with POST data a browser's encoder could not produce (lone surrogates).

    Django decodes request bodies with errors="replace", so a test client
    cannot send them; code that builds a QueryDict itself (or a future
    decoder) can. The view must still answer with an inline error.
    """
    request = RequestFactory().post(model_admin.get_urls()[0].pattern.regex.pattern, {})
    request.user = superuser
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    request._dont_enforce_csrf_checks = True
    post = QueryDict(mutable=True)
    for key, value in data.items():
        post[key] = value
    request._post = post
    response = model_admin.add_view(request)
    response.render()
    return response


@pytest.mark.django_db
@pytest.mark.parametrize("name", HOSTILE)
def test_admin_job_form_with_a_hostile_task_name_answers_with_an_inline_error(superuser, name):
    response = post_as_form_data(superuser, admin.site._registry[Job], {"task": name, "args": "[1]", "kwargs": "{}"})
    assert response.status_code == 200
    page = response.content.decode("utf-8")  # it could be encoded: no lone surrogate in it
    errors = response.context_data["adminform"].form.errors["task"]
    assert "is not a registered task" in errors[0]
    is_safe(errors[0])
    assert "errorlist" in page
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "field, value", [("task", "\ud800"), ("timezone", "\ud800"), ("timezone", "\x1b[31m"), ("cron", "\ud800 * * * *")]
)
def test_admin_schedule_form_with_hostile_text_answers_with_an_inline_error(superuser, field, value):
    data = {
        "name": "s",
        "task": ADD,
        "args": "[1]",
        "kwargs": "{}",
        "cron": "0 2 * * *",
        "timezone": "UTC",
        "misfire_policy": "run_once",
        "enabled": "on",
    }
    data[field] = value
    response = post_as_form_data(superuser, admin.site._registry[Schedule], data)
    assert response.status_code == 200
    response.content.decode("utf-8")
    for message in response.context_data["adminform"].form.errors[field]:
        is_safe(message)
    assert not Schedule.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", HOSTILE)
def test_api_answers_400_with_a_safe_message(superuser, name):
    client = APIClient()
    client.force_authenticate(superuser)
    # As a client sends it: non-ASCII escaped (a lone surrogate cannot be UTF-8).
    response = client.post("/api/jobs/", json.dumps({"task": name, "args": [1, 2]}), content_type="application/json")
    assert response.status_code == 400, response.content
    message = response.json()["task"][0]
    assert "is not a registered task" in message
    is_safe(message)


@pytest.mark.django_db
def test_service_messages_for_schedules_are_safe():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as info:
        schedules.create(name="s", task="\ud800", args=[], cron="0 2 * * *", timezone="\x1b[31m")
    for messages in info.value.message_dict.values():
        for message in messages:
            is_safe(message)
