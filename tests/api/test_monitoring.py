"""GET /api/tasks/, /api/workers/, /api/queues/, /api/stats/ and queue pause/resume."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle, registry
from scheduler_app.models import Job, Queue, Worker, WorkerState
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def test_tasks_lists_every_registered_task(api):
    body = api.get("/api/tasks/").json()
    assert [t["name"] for t in body] == registry.names()
    important = next(t for t in body if t["name"] == "tests.testapp.tasks.important")
    assert important == {
        "name": "tests.testapp.tasks.important",
        "queue": "other",
        "priority": 10,
        "doc": "",
        "signature": "(x=None)",
        "is_async": False,
        "takes_context": False,
        "options": {},
    }
    record = next(t for t in body if t["name"] == "tests.testapp.tasks.record")
    assert record["signature"] == "(marker_dir, name)"
    assert record["doc"].startswith("Write a file named after the job id")


@pytest.fixture
def workers():
    now = timezone.now()
    alive = Worker.objects.create(
        id="host-1:100:abc",
        hostname="host-1",
        pid=100,
        queues=["default", "slow"],
        slots={"*": 4},
        started_at=now - timedelta(minutes=5),
        last_heartbeat=now,
        running=2,
        processed=40,
        failed=3,
    )
    dead = Worker.objects.create(
        id="host-2:200:def",
        hostname="host-2",
        pid=200,
        queues=["other"],
        slots={"other": 2},
        started_at=now - timedelta(hours=2),
        last_heartbeat=now - timedelta(hours=1),
    )
    stopped = Worker.objects.create(
        id="host-3:300:ghi",
        hostname="host-3",
        pid=300,
        queues=["default"],
        slots={"default": 1},
        state=WorkerState.STOPPED,
        started_at=now - timedelta(hours=3),
        last_heartbeat=now,
    )
    return alive, dead, stopped


def test_workers(api, workers):
    body = api.get("/api/workers/").json()
    assert body["count"] == 3
    rows = body["results"]
    assert [r["id"] for r in rows] == [w.id for w in workers]
    assert rows[0] == {
        "id": "host-1:100:abc",
        "hostname": "host-1",
        "pid": 100,
        "queues": ["default", "slow"],
        "slots": {"*": 4},
        "started_at": rows[0]["started_at"],
        "last_heartbeat": rows[0]["last_heartbeat"],
        "alive": True,
        "leader": False,
        "running": 2,
        "processed": 40,
        "failed": 3,
    }
    assert [r["alive"] for r in rows] == [True, False, False]


def test_queues(api, workers, enqueue_job, set_status):
    old = enqueue_job(queue="default", execute_at=timezone.now() - timedelta(seconds=30))
    enqueue_job(queue="default", execute_at=timezone.now() + timedelta(hours=1))
    set_status(enqueue_job(queue="slow"), "running")
    lifecycle.pause_queue("slow")
    body = {q["name"]: q for q in api.get("/api/queues/").json()}
    assert set(body) == {"default", "slow", "other"}
    default = body["default"]
    assert (default["paused"], default["pending"], default["due"], default["running"]) == (False, 2, 1, 0)
    assert 29 <= default["oldest_due_lag_seconds"] < 60
    assert default["slots"] == 4  # the alive worker's shared pool; the others are not alive
    assert (body["slow"]["paused"], body["slow"]["running"], body["slow"]["slots"]) == (True, 1, 4)
    assert body["other"]["slots"] == 0
    assert old.pk


def test_pause_and_resume(api, enqueue_job, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api.post("/api/queues/default/pause/")
    assert response.status_code == 200
    assert response.json()["name"] == "default" and response.json()["paused"] is True
    assert Queue.objects.get(name="default").paused
    assert callbacks, "pausing must wake the dispatchers"
    assert lifecycle.paused_queues() == {"default"}

    # Jobs can still be created and cancelled while the queue is paused.
    created = api.post("/api/jobs/", {"task": ADD, "args": [1, 2], "queue": "default"}, format="json")
    assert created.status_code == 201
    cancelled = api.post(f"/api/jobs/{created.json()['id']}/cancel/")
    assert cancelled.json()["status"] == "cancelled"

    response = api.post("/api/queues/default/resume/")
    assert response.status_code == 200 and response.json()["paused"] is False
    assert lifecycle.paused_queues() == set()


def test_pausing_twice_is_fine(api):
    assert api.post("/api/queues/slow/pause/").status_code == 200
    assert api.post("/api/queues/slow/pause/").json()["paused"] is True


@pytest.mark.parametrize("name", ["nope", "DEFAULT", "%00", "d%C3%A9faut"])
def test_unknown_queue_is_404(api, name):
    for verb in ("pause", "resume"):
        response = api.post(f"/api/queues/{name}/{verb}/")
        assert response.status_code == 404
        assert "detail" in response.json()
    assert not Queue.objects.exists()


def test_stats(api, workers, enqueue_job, set_status):
    now = timezone.now()
    enqueue_job(queue="default", execute_at=now - timedelta(seconds=10))
    enqueue_job(queue="slow", execute_at=now + timedelta(hours=1))
    set_status(enqueue_job(), "running")
    set_status(enqueue_job(), "succeeded", finished_at=now - timedelta(seconds=10))
    set_status(enqueue_job(), "failed", finished_at=now - timedelta(minutes=10))
    set_status(enqueue_job(), "succeeded", finished_at=now - timedelta(hours=2))
    set_status(enqueue_job(), "cancelled")
    body = api.get("/api/stats/").json()
    assert set(body) == {"jobs", "queues", "oldest_due_lag_seconds", "throughput", "workers"}
    assert body["jobs"] == {"pending": 2, "waiting": 0, "running": 1, "succeeded": 2, "failed": 1, "cancelled": 1}
    assert body["queues"]["default"] == {"pending": 1, "waiting": 0, "due": 1, "running": 1}
    assert body["queues"]["slow"] == {"pending": 1, "waiting": 0, "due": 0, "running": 0}
    assert body["queues"]["other"] == {"pending": 0, "waiting": 0, "due": 0, "running": 0}
    assert 9 <= body["oldest_due_lag_seconds"] < 60
    assert body["throughput"] == {"last_minute": 1, "last_hour": 2}
    assert body["workers"] == {"alive": 1}


def test_stats_when_empty(api):
    body = api.get("/api/stats/").json()
    assert body["jobs"] == dict.fromkeys(["pending", "waiting", "running", "succeeded", "failed", "cancelled"], 0)
    assert body["oldest_due_lag_seconds"] == 0.0
    assert body["workers"] == {"alive": 0}
    assert Job.objects.count() == 0
