"""One leader runs the maintenance, across real dispatcher processes; kill -9 of it hands the lead on.

Three `rundispatcher` processes on the test database (both databases):
exactly one is reported ``leader: true`` by ``GET /api/workers/``; after
``kill -9`` of the leader another leads, and the jobs the dead leader was
running are rescued, within its lease plus five seconds (the guarantee,
docs/GUARANTEES.md; a deadline, not a measurement).
"""

import signal
import time

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.vocabulary.policy import LEASE_EXPIRED_CLASS
from tests.plumbing import log_tail, start_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 4.0
SLEEPER = "tests.testapp.tasks.sleeper"


def workers(client):
    response = client.get("/api/workers/?page_size=100")
    assert response.status_code == 200, response.content
    return [w for w in response.json()["results"] if w["alive"]]


def leaders(client):
    return [w for w in workers(client) if w["leader"]]


def test_one_of_three_dispatchers_leads_and_a_kill_9_of_it_hands_the_lead_and_its_jobs_on(admin_client, tmp_path):
    jobs = [lifecycle.enqueue(SLEEPER, [60.0], max_attempts=3)[0].pk for _ in range(6)]
    args = ("--concurrency", "2", "--lease", str(LEASE), "--grace", "0")
    processes = [start_dispatcher(*args, log_path=tmp_path / f"{n}.log") for n in range(3)]
    logs = lambda: "\n".join(log_tail(tmp_path / f"{n}.log") for n in range(3))  # noqa: E731
    try:
        assert wait_for(lambda: len(workers(admin_client)) == 3, 60), logs()
        assert wait_for(lambda: Job.objects.filter(status="running").count() == 6, 60), logs()
        assert wait_for(lambda: len(leaders(admin_client)) == 1, 30), (workers(admin_client), logs())
        for _ in range(5):  # exactly one, each time it is asked
            assert len(leaders(admin_client)) == 1
            time.sleep(0.2)
        (first,) = leaders(admin_client)
        victim = next(p for p in processes if p.pid == first["pid"])
        theirs = set(Job.objects.filter(status="running", worker=first["id"]).values_list("pk", flat=True))
        assert theirs, "the leader runs jobs too"
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed_at = time.monotonic()
        deadline = LEASE + 5.0

        def new_leader():
            found = leaders(admin_client)
            return len(found) == 1 and found[0]["id"] != first["id"]

        def rescued():
            rows = Job.objects.filter(pk__in=theirs).values_list("errors", flat=True)
            return all(any(e["exception_class"] == LEASE_EXPIRED_CLASS for e in errors) for errors in rows)

        assert wait_for(new_leader, deadline), (workers(admin_client), logs())
        assert wait_for(rescued, max(0.1, deadline - (time.monotonic() - killed_at))), (
            list(Job.objects.filter(pk__in=theirs).values("status", "errors")),
            logs(),
        )
        # The others run on: still one leader among the two left.
        assert len(workers(admin_client)) >= 2 and len(leaders(admin_client)) == 1
        assert set(jobs) >= theirs
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait(30)
