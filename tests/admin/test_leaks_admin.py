"""The admin's side of the leaks: a held unique key, huge arguments, commands a job may not run."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import override_settings
from django.urls import reverse

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:scheduler_app_job_add")
CHANGELIST = reverse("admin:scheduler_app_job_changelist")
RUN_COMMAND = "scheduler_app.tasks.run_command"


def staff_client(client, *codenames):
    user = get_user_model().objects.create_user("clerk", "clerk@example.com", "pw-123-clerk", is_staff=True)
    grant(user, *codenames)
    client.force_login(user)
    return client


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_who_may_only_add_learns_the_holders_id_and_nothing_else(client):
    held, _ = lifecycle.enqueue("tests.testapp.tasks.noop", [], {"password": "hunter2"}, unique_key="payroll")
    adder = staff_client(client, "add_job")
    response = adder.post(ADD_URL, {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "unique_key": "payroll"})
    assert response.status_code == 302 and response["Location"] == ADD_URL
    assert messages_of(response) == [f"No job was created: job #{held.pk} already holds unique key “payroll”."]
    page = adder.get(ADD_URL).content.decode()
    assert "hunter2" not in page and "(pending)" not in page
    assert Job.objects.count() == 1


def test_who_may_view_is_sent_to_the_holder(client):
    held, _ = lifecycle.enqueue(ADD, [1, 2], unique_key="nightly")
    viewer = staff_client(client, "add_job", "view_job")
    response = viewer.post(ADD_URL, {"task": ADD, "args": "[1, 2]", "kwargs": "{}", "unique_key": "nightly"})
    assert response["Location"] == reverse("admin:scheduler_app_job_change", args=[held.pk])
    assert "(pending)" in messages_of(response)[0]


def form_errors(response):
    assert response.status_code == 200, response.status_code
    return response.context["adminform"].form.errors


def test_arguments_over_the_limit_are_an_inline_error(admin_client_):
    big = '["' + "x" * (1024 * 1024) + '"]'
    errors = form_errors(admin_client_.post(ADD_URL, {"task": "tests.testapp.tasks.noop", "args": big, "kwargs": "{}"}))
    assert errors["args"] == [
        'The arguments take 1,048,582 bytes as JSON (args and kwargs together); at most 1,048,576 (SCHEDULER["ARGS_MAX_BYTES"]).'
    ]
    assert not Job.objects.exists()


def test_a_command_that_is_not_allowed_is_an_inline_error(admin_client_):
    errors = form_errors(admin_client_.post(ADD_URL, {"task": RUN_COMMAND, "args": '["purgejobs"]', "kwargs": "{}"}))
    assert errors["args"] == [
        "Command 'purgejobs' is not allowed: run_command runs only the commands "
        'SCHEDULER["RUN_COMMAND_ALLOWED"] lists (none).'
    ]
    assert not Job.objects.exists()


@override_settings(SCHEDULER={"RUN_COMMAND_ALLOWED": ["purgejobs"]})
def test_an_allowed_command_is_created(admin_client_):
    response = admin_client_.post(ADD_URL, {"task": RUN_COMMAND, "args": '["purgejobs", "--dry-run"]', "kwargs": "{}"})
    assert response.status_code == 302 and Job.objects.get().args == ["purgejobs", "--dry-run"]


def test_the_job_list_never_renders_arguments(admin_client_):
    lifecycle.enqueue("tests.testapp.tasks.noop", ["q" * 500_000])
    response = admin_client_.get(CHANGELIST)
    assert response.status_code == 200
    assert "qqqq" not in response.content.decode() and len(response.content) < 200_000
