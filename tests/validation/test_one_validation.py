"""One rule per field: the API, the admin, the `enqueue` command and `task.enqueue()` refuse
the same bad values with the same message, and store nothing.

Each row gives the bad value as each entry point receives it (JSON for the
API, typed text for the admin form and the command line, a Python value for
django.tasks); ``None`` where an entry point cannot express it.
"""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.tasks.exceptions import InvalidTask

from scheduler_app.models import Job
from tests.testapp import tasks

ADD = "tests.testapp.tasks.add"
ADD_URL = "/admin/scheduler_app/job/add/"
NOT_REGISTERED = (
    "'os.system' is not a registered task. Tasks must be @task functions in an installed app's tasks.py "
    "(or a module in SCHEDULER['TASK_MODULES']); GET /api/tasks/ lists them."
)
DEEP_JSON = "[" * 65 + "]" * 65
BIG = "x" * (1024 * 1024)


def deep(n):
    value = []
    for _ in range(n - 1):
        value = [value]
    return value


MINUS_ONE = timezone(timedelta(hours=-1))

# field, JSON value (API), text (admin form, command line), django.tasks call, message
ROWS = [
    ("task", "os.system", "os.system", None, NOT_REGISTERED),
    ("priority", 500, "500", lambda: tasks.add.using(priority=500), "Must be a whole number from -100 to 100."),
    ("priority", "high", "high", None, "Must be a whole number from -100 to 100."),
    ("max_attempts", 0, "0", None, "Must be a whole number from 1 to 100."),
    ("max_attempts", 101, "101", None, "Must be a whole number from 1 to 100."),
    (
        "timeout",
        -1,
        "-1",
        None,
        "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
    ),
    (
        "timeout",
        0,
        "0",
        None,
        "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
    ),
    # A positive number that rounds to nothing added to a time.
    (
        "timeout",
        5e-324,
        "5e-324",
        None,
        "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
    ),
    (
        "timeout",
        0.0009,
        "0.0009",
        None,
        "Must be a number of seconds from 0.001 to 31536000, or a duration such as 90s, 2h, 3d or 1h30m.",
    ),
    (
        "queue",
        "nope",
        "nope",
        lambda: tasks.add.using(queue_name="nope"),
        "Unknown queue 'nope'. Known queues: default, other, slow.",
    ),
    (
        "queue",
        "a/b",
        "a/b",
        lambda: tasks.add.using(queue_name="a/b"),
        "Unknown queue: queue names are 1 to 64 letters, digits, '_', '.' or '-'. Known queues: default, other, slow.",
    ),
    ("args", {"a": 1}, '{"a": 1}', None, "Must be a JSON list of positional arguments."),
    ("kwargs", [1], "[1]", None, "Must be a JSON object of keyword arguments."),
    (
        "args",
        ["a\x00b"],
        '["a\\u0000b"]',
        lambda: tasks.add.enqueue("a\x00b", 1),
        "Text may not contain NUL (\\u0000) characters.",
    ),
    (
        "kwargs",
        {"k\x00": 1},
        '{"k\\u0000": 1}',
        lambda: tasks.add.enqueue(**{"k\x00": 1}),
        "Text may not contain NUL (\\u0000) characters.",
    ),
    (
        "args",
        ["\ud800"],
        '["\\ud800"]',
        lambda: tasks.add.enqueue("\ud800", 1),
        "Text may not contain lone surrogate characters.",
    ),
    ("args", deep(65), DEEP_JSON, lambda: tasks.add.enqueue(deep(65), 1), "Nested more than 64 levels deep."),
    ("args", None, None, lambda: tasks.add.enqueue(object(), 1), "Must be JSON: object values cannot be stored."),
    ("unique_key", "k" * 256, "k" * 256, None, "Must be text of at most 255 characters."),
    (
        "args",
        [BIG, 1],
        json.dumps([BIG, 1]),
        lambda: tasks.add.enqueue(BIG, 1),
        # ["x…x",1] and kwargs' {}: SCHEDULER["ARGS_MAX_BYTES"] bounds args and kwargs together.
        'The arguments take 1,048,584 bytes as JSON (args and kwargs together); at most 1,048,576 (SCHEDULER["ARGS_MAX_BYTES"]).',
    ),
    (
        "execute_at",
        "9999-12-31T23:59:59-01:00",
        None,
        lambda: tasks.add.using(run_after=datetime(9999, 12, 31, 23, 59, 59, tzinfo=MINUS_ONE)),
        "Must be no later than 9999-12-30T23:59:59Z.",
    ),
    (
        # Year 10000 in Asia/Tokyo: every page that showed the job failed there.
        "execute_at",
        "9999-12-31T00:00:00Z",
        None,
        lambda: tasks.add.using(run_after=datetime(9999, 12, 31, tzinfo=UTC)),
        "Must be no later than 9999-12-30T23:59:59Z.",
    ),
    (
        "execute_at",
        "0001-01-01T23:59:59Z",
        None,
        lambda: tasks.add.using(run_after=datetime(1, 1, 1, 23, 59, 59, tzinfo=UTC)),
        "Must be no earlier than 0001-01-02T00:00:00Z.",
    ),
    (
        "execute_at",
        "0001-01-01T00:00:00+05:00",
        None,
        lambda: tasks.add.using(run_after=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))),
        "Must be no earlier than 0001-01-02T00:00:00Z.",
    ),
    (
        "execute_at",
        "2030-01-01T00:00:00",
        None,
        lambda: tasks.add.using(run_after=datetime(2030, 1, 1)),
        "Must carry a time zone offset (e.g. 2026-01-01T09:00:00+00:00).",
    ),
]
# The command line spells some fields differently.
CLI_OPTION = {
    "args": "--args",
    "kwargs": "--kwargs",
    "priority": "--priority",
    "queue": "--queue",
    "max_attempts": "--max-attempts",
    "timeout": "--timeout",
    "unique_key": "--unique-key",
    "execute_at": "--at",
}
pytestmark = pytest.mark.django_db


def ids(row):
    return f"{row[0]}={str(row[1] if row[1] is not None else row[2])[:20]}"


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_api(api, row):
    field, value, _, _, message = row
    if value is None:
        pytest.skip("not expressible in JSON")
    body = {"task": ADD, "args": [1, 2]}
    body[field] = value
    # As a client sends it: non-ASCII escaped (a lone surrogate cannot be UTF-8).
    response = api.post("/api/jobs/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert message in response.json()[field]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_admin_form(client, superuser, row):
    field, _, text, _, message = row
    if text is None or field == "execute_at":
        pytest.skip("the admin's date and time boxes are in the site's time zone")
    client.force_login(superuser)
    data = {"task": ADD, "args": "[1, 2]", "kwargs": "{}", field: text}
    response = client.post(ADD_URL, data)
    assert response.status_code == 200
    assert message in response.context["adminform"].form.errors[field]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_enqueue_command(row):
    field, value, text, _, message = row
    if field == "execute_at":
        text = value  # the command line takes the ISO text itself
    if text is None:
        pytest.skip("not expressible on the command line")
    argv = [text] if field == "task" else [ADD, "--args", "[1, 2]", CLI_OPTION[field], text]
    with pytest.raises(CommandError) as info:
        call_command("enqueue", *argv)
    assert message in str(info.value)
    assert Job.objects.count() == 0


# What a django.tasks caller calls the fields it can give (Task.using, enqueue).
TASKS_WORDS = {
    "execute_at": "run_after",
    "queue": "queue_name",
    "priority": "priority",
    "args": "args",
    "kwargs": "kwargs",
}


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_django_tasks(row):
    """In the caller's words (run_after, not execute_at); refused arguments are a TypeError too, as Django's own."""
    field, _, _, call, message = row
    if call is None:
        pytest.skip("django.tasks cannot express it")
    with pytest.raises(InvalidTask) as info:
        call()
    assert str(info.value) == f"{TASKS_WORDS[field]}: {message}"
    assert isinstance(info.value, TypeError) is (field in ("args", "kwargs"))
    assert Job.objects.count() == 0


def test_an_unregistered_task_is_refused_in_the_same_words():
    from tests.testapp import stray

    with pytest.raises(InvalidTask) as info:
        stray.stray.enqueue()
    assert str(info.value) == "task: " + NOT_REGISTERED.replace("os.system", "tests.testapp.stray.stray")


def test_the_first_and_latest_instants_are_a_day_inside_pythons():
    from scheduler_app.vocabulary.bounds import EARLIEST, LATEST

    # A day inside: no zone is a day from UTC, so every zone has a date for each.
    assert datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC) == LATEST
    assert datetime(1, 1, 2, tzinfo=UTC) == EARLIEST


FAR_EAST = timezone(timedelta(hours=19, minutes=55))  # Python allows it; PostgreSQL stops at 15:59


def test_an_offset_the_database_cannot_hold_is_stored_as_the_same_instant(api):
    at = datetime(2030, 6, 24, 21, 52, 28, 853752, tzinfo=FAR_EAST)
    response = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "execute_at": at.isoformat()}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["execute_at"] == "2030-06-24T01:57:28.853752Z"
    tasks.add.using(run_after=at).enqueue(1, 2)
    response = api.post(
        "/api/schedules/",
        {
            "name": "s",
            "task": ADD,
            "args": [1, 2],
            "interval_seconds": 60,
            "start_at": at.isoformat(),
            "end_at": "9999-01-01T00:00:00+15:00",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert [job.execute_at for job in Job.objects.all()] == [at, at]
