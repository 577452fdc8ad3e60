"""``?task=`` takes a task's short name when one known task has it (API and admin), and refuses an ambiguous one."""

import pytest

from scheduler_app import registry
from scheduler_app.models import Job

pytestmark = pytest.mark.django_db
ADD = "tests.testapp.tasks.add"
# Registered twice: scheduler_app.demo.tasks.noop and tests.testapp.tasks.noop.
NOOPS = ["scheduler_app.demo.tasks.noop", "tests.testapp.tasks.noop"]


@pytest.fixture
def jobs(job_row):
    return {
        "add": job_row(task=ADD),
        "noop": job_row(task="tests.testapp.tasks.noop"),
        # A task removed since: only its jobs know its path.
        "gone": job_row(task="old.module.vanished"),
    }


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        (ADD, [ADD]),
        ("add", [ADD]),
        ("tasks.add", [ADD]),
        ("testapp.tasks.add", [ADD]),
        ("noop", NOOPS),
        ("tasks.noop", NOOPS),
        ("testapp.tasks.noop", ["tests.testapp.tasks.noop"]),
        ("vanished", ["old.module.vanished"]),
        ("old.module.vanished", ["old.module.vanished"]),
        ("nothing_at_all", []),
        ("dd", []),  # an end of a path is a whole dotted part, not any suffix
        ("%", []),
        ("_dd", []),
    ],
)
def test_paths_named(jobs, text, paths):
    assert registry.paths_named(text) == paths


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("add", ["add"]),
        ("tasks.add", ["add"]),
        (ADD, ["add"]),
        ("vanished", ["gone"]),
        ("testapp.tasks.noop", ["noop"]),
    ],
)
def test_api_filters_by_a_short_name(api, jobs, text, expected):
    response = api.get("/api/jobs/", {"task": text})
    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [jobs[k].pk for k in expected]


def test_api_refuses_an_ambiguous_name_listing_the_matches(api, jobs):
    response = api.get("/api/jobs/", {"task": "noop"})
    assert response.status_code == 400
    assert response.json() == {
        "task": [f"'noop' names more than one task: {', '.join(NOOPS)}. Give the full path (or more of its end)."]
    }


def test_api_a_name_nothing_has_is_an_empty_list(api, jobs):
    response = api.get("/api/jobs/", {"task": "nothing_at_all"})
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_a_long_list_of_matches_is_cut(api, job_row):
    for n in range(registry.MATCHES_SHOWN + 3):
        job_row(task=f"app{n:02}.tasks.same")
    response = api.get("/api/jobs/", {"task": "same"})
    assert response.status_code == 400
    [message] = response.json()["task"]
    assert message.count(".tasks.same") == registry.MATCHES_SHOWN and ", ..." in message


def test_admin_filters_by_a_short_name(client, superuser, jobs):
    client.force_login(superuser)
    response = client.get("/admin/scheduler_app/job/", {"task": "add"})
    assert response.status_code == 200
    assert [job.pk for job in response.context["cl"].result_list] == [jobs["add"].pk]


def test_admin_says_which_tasks_an_ambiguous_name_means(client, superuser, jobs):
    client.force_login(superuser)
    response = client.get("/admin/scheduler_app/job/", {"task": "noop"})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []
    messages = [str(m) for m in response.context["messages"]]
    assert messages == [
        f"'noop' names more than one task: {', '.join(NOOPS)}. Give the full path (or more of its end)."
    ]
    assert Job.objects.count() == 3


def test_history_takes_a_short_name_too(api, jobs):
    assert api.get("/api/stats/history/", {"task": "add"}).status_code == 200
    response = api.get("/api/stats/history/", {"task": "noop"})
    assert response.status_code == 400
    assert response.json()["task"] == [
        f"'noop' names more than one task: {', '.join(NOOPS)}. Give the full path (or more of its end)."
    ]
