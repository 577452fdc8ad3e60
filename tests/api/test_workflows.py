"""POST /api/workflows/, GET /api/workflows/ and /{id}/, POST /{id}/retry/ and /cancel/.

Who may call them is in test_permissions.py's table (view, add and change
on the workflow model); here: the shapes of the answers, the 400s.
"""

import pytest

from scheduler_app.models import Job, Workflow
from scheduler_app.testing import drain
from tests.plumbing import ADD, claim

pytestmark = pytest.mark.django_db

TOTAL = "tests.testapp.tasks.total"
BOOM = "tests.testapp.tasks.boom"
ECHO = "tests.testapp.tasks.echo"

CHORD = {
    "name": "sums",
    "jobs": [
        {"task": ADD, "args": [1, 2]},
        {"task": ADD, "args": [3, 4]},
        {"task": TOTAL, "depends_on_index": [0, 1], "pass_results": True},
    ],
    "on_success": {"task": ECHO, "args": ["ok"]},
    "on_finish": {"task": ECHO, "args": ["done"]},
}


def test_create_answers_201_with_the_id_status_and_job_ids_then_runs_with_results(api):
    response = api.post("/api/workflows/", CHORD, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "status", "jobs"} and body["status"] == "pending" and len(body["jobs"]) == 3
    assert list(Job.objects.filter(workflow_id=body["id"]).order_by("pk").values_list("pk", flat=True)) == body["jobs"]
    drain()
    detail = api.get(f"/api/workflows/{body['id']}/").json()
    assert detail["status"] == "succeeded" and detail["name"] == "sums"
    assert detail["counts"]["succeeded"] == 3 and detail["counts"]["failed"] == 0
    assert [j["status"] for j in detail["jobs"]] == ["succeeded"] * 3
    assert detail["results"] == {str(body["jobs"][0]): 3, str(body["jobs"][1]): 7, str(body["jobs"][2]): 10}
    assert [e["callback"] for e in detail["callbacks"]["enqueued"]] == ["on_success", "on_finish"]


def test_list_filters_by_status_and_name(api):
    first = api.post("/api/workflows/", CHORD, format="json").json()["id"]
    other = api.post("/api/workflows/", {**CHORD, "name": "other"}, format="json").json()["id"]
    drain()
    assert [w["id"] for w in api.get("/api/workflows/").json()["results"]] == [other, first]
    assert [w["id"] for w in api.get("/api/workflows/?name=other").json()["results"]] == [other]
    listed = api.get("/api/workflows/?status=succeeded").json()["results"]
    assert {w["id"] for w in listed} == {first, other} and listed[0]["status"] == "succeeded"
    assert api.get("/api/workflows/?status=running").json()["results"] == []
    bad = api.get("/api/workflows/?status=nope")
    assert bad.status_code == 400 and "status" in bad.json()


def test_a_workflow_whose_first_job_runs_is_listed_as_running(api):

    created = api.post("/api/workflows/", CHORD, format="json").json()
    assert [w["id"] for w in api.get("/api/workflows/?status=pending").json()["results"]] == [created["id"]]
    claim("w", queues=["default"], limit=1, lease=30)
    listed = api.get("/api/workflows/?status=running").json()["results"]
    assert [(w["id"], w["status"]) for w in listed] == [(created["id"], "running")]
    assert api.get("/api/workflows/?status=pending").json()["results"] == []


def test_retry_and_cancel_answer_200_with_the_workflow(api):
    body = {"jobs": [{"task": BOOM, "max_attempts": 1}, {"task": ECHO, "depends_on_index": [0], "pass_results": True}]}
    created = api.post("/api/workflows/", body, format="json").json()
    drain()
    detail = api.get(f"/api/workflows/{created['id']}/").json()
    assert detail["status"] == "failed" and [j["status"] for j in detail["jobs"]] == ["failed", "cancelled"]
    retried = api.post(f"/api/workflows/{created['id']}/retry/")
    assert retried.status_code == 200
    assert retried.json()["status"] == "pending"  # none of its jobs has run or ended since
    assert [j["status"] for j in retried.json()["jobs"]] == ["pending", "waiting"]
    cancelled = api.post(f"/api/workflows/{created['id']}/cancel/")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["counts"]["cancelled"] == 2
    assert api.post("/api/workflows/999999/retry/").status_code == 404
    assert api.get("/api/workflows/x/").status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({"jobs": []}, "jobs"),
        ({"name": "x" * 201, "jobs": [{"task": ADD, "args": [1, 2]}]}, "name"),
        ({"jobs": [{"task": "no.such.task"}]}, "jobs"),
        ({"jobs": [{"task": ADD, "args": [1, 2], "depends_on_index": [5]}]}, "jobs"),
        ({"jobs": [{"task": ADD, "args": [1, 2], "depends_on_index": [0]}]}, "jobs"),
        ({"jobs": [{"task": ADD, "args": [1, 2], "pass_results": "yes"}]}, "jobs"),
        (
            {
                "jobs": [
                    {"task": ADD, "args": [1, 2]},
                    {"task": ADD, "args": [1, 2], "depends_on_index": [0], "pass_results": True},
                ]
            },
            "jobs",
        ),
        ({"jobs": [{"task": ADD, "args": [1, 2]}], "on_success": {"task": "no.such.task"}}, "on_success"),
        ({"jobs": [{"task": ADD, "args": [1, 2]}], "on_failure": {"task": ADD, "args": "x"}}, "on_failure"),
        ({"jobs": [{"task": ADD, "args": [1, 2]}], "colour": "red"}, "colour"),
        ([1, 2], "non_field_errors"),
    ],
)
def test_bad_input_is_a_400_with_field_errors_and_creates_nothing(api, body, field):
    response = api.post("/api/workflows/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_a_callback_the_lifecycle_refuses_is_a_400_by_callback(api):
    body = {"jobs": [{"task": ADD, "args": [1, 2]}], "on_finish": {"task": ADD, "args": [1]}}
    response = api.post("/api/workflows/", body, format="json")
    assert response.status_code == 400
    assert "on_finish" in response.json()
    assert not Workflow.objects.exists()


def test_a_callback_depending_on_no_job_is_a_400_naming_it(api):
    kept = api.post("/api/jobs/", {"task": ADD, "args": [2, 3]}, format="json").json()["id"]
    body = {"jobs": [{"task": ADD, "args": [1, 2]}], "on_failure": {"task": ECHO, "depends_on": [kept, 987654]}}
    response = api.post("/api/workflows/", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"on_failure": ["depends_on: No job has the id 987654."]}
    assert list(Job.objects.values_list("pk", flat=True)) == [kept] and not Workflow.objects.exists()


def test_plain_jobs_take_pass_results_too(api):
    first = api.post("/api/jobs/", {"task": ADD, "args": [2, 3]}, format="json").json()["id"]
    second = api.post("/api/jobs/", {"task": ECHO, "depends_on": [first], "pass_results": True}, format="json")
    assert second.status_code == 201, second.content
    drain()
    assert api.get(f"/api/jobs/{second.json()['id']}/").json()["result"] == [5]


def test_a_callback_keeps_every_time_it_was_given(api):
    """A callback spec is stored as JSON, its times as text: each is read back as the time it was (expires_at too)."""
    later, expires = "2031-05-06T07:08:09+02:00", "2032-01-02T03:04:05.5+12:33"
    body = {
        "jobs": [{"task": ADD, "args": [1, 2]}],
        "on_success": {"task": ECHO, "args": ["ok"], "execute_at": later, "expires_at": expires},
        "on_finish": {"task": ECHO, "args": ["done"], "expires_at": "0268-04-07T13:35:04.0+12:33"},
    }
    response = api.post("/api/workflows/", body, format="json")
    assert response.status_code == 201, response.content
    drain()
    workflow = Workflow.objects.get(pk=response.json()["id"])
    made = {e["callback"]: Job.objects.get(pk=e["job"]) for e in workflow.callbacks["enqueued"]}
    assert made["on_success"].execute_at.isoformat() == "2031-05-06T05:08:09+00:00"
    assert made["on_success"].expires_at.isoformat() == "2032-01-01T14:31:05.500000+00:00"
    assert made["on_finish"].expires_at.year == 268
