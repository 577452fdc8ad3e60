"""Why a late pending job waits (``observability.lateness``): each reason, its precedence, batched
reads, and where it shows (the API's ``late_reason``, the admin's list and page, the dashboard)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app.models import Job, JobStatus, Queue, QueueStart, Worker
from scheduler_app.models.workers import WorkerState
from scheduler_app.observability import lateness
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def late_job(queue="default", seconds=60, **fields):
    return Job.objects.create(
        task=ADD, args=[1, 2], queue=queue, execute_at=timezone.now() - timedelta(seconds=seconds), **fields
    )


def running(queue="default", worker="w1"):
    now = timezone.now()
    return Job.objects.create(
        task=ADD,
        args=[1, 2],
        queue=queue,
        execute_at=now,
        status=JobStatus.RUNNING,
        attempts=1,
        worker=worker,
        started_at=now,
        last_attempted_at=now,
    )


def dispatcher(id="w1", queues=("default", "other"), slots=None, seconds_ago=0, state=WorkerState.ALIVE):
    return Worker.objects.create(
        id=id,
        hostname="h",
        pid=1,
        queues=sorted(queues),
        slots=slots or {"*": 2},
        state=state,
        last_heartbeat=timezone.now() - timedelta(seconds=seconds_ago),
    )


def queue(name="default", **fields):
    return Queue.objects.update_or_create(name=name, defaults=fields)[0]


def reason(job):
    return lateness.late_reason(Job.objects.get(pk=job.pk))


def test_no_reason_when_the_job_is_not_late_or_not_pending():
    dispatcher()
    queue(paused=True)
    assert reason(late_job(seconds=-60)) is None  # in the future
    assert reason(late_job(seconds=0)) is None  # due this instant: not late yet
    assert reason(running()) is None
    assert reason(late_job(status=JobStatus.WAITING)) is None


def test_a_free_slot_and_no_limit_is_no_reason():
    dispatcher()
    assert reason(late_job()) is None


def test_paused_comes_first():
    queue(paused=True, concurrency_limit=1)
    running()
    assert reason(late_job()) == "paused"  # no dispatcher either, the limit reached too: paused says why


@pytest.mark.parametrize("case", ["none", "stale", "stopped", "other_queue"])
def test_no_dispatcher(case):
    if case == "stale":
        dispatcher(seconds_ago=3600)
    elif case == "stopped":
        dispatcher(state=WorkerState.STOPPED)
    elif case == "other_queue":
        dispatcher(queues=["other"], slots={"other": 2})
    assert reason(late_job()) == "no_dispatcher"


def test_concurrency_limited():
    dispatcher(slots={"*": 8})
    queue(concurrency_limit=2)
    running(worker="w1")
    job = late_job()
    assert reason(job) is None
    running(worker="elsewhere")  # counted across every dispatcher
    assert reason(job) == "concurrency_limited"


def test_rate_limited_counts_the_starts_in_the_window():
    dispatcher()
    queue(rate_limit=2, rate_period=60.0)
    now = timezone.now()
    QueueStart.objects.create(queue="default", started_at=now - timedelta(seconds=120))  # out of the window
    QueueStart.objects.create(queue="default", started_at=now - timedelta(seconds=10))
    job = late_job()
    assert reason(job) is None
    QueueStart.objects.create(queue="default", started_at=now - timedelta(seconds=5))
    assert reason(job) == "rate_limited"


def test_no_free_slot_in_a_shared_group():
    dispatcher(slots={"*": 1})
    running(queue="other")  # the shared slot runs another queue's job
    assert reason(late_job()) == "no_free_slot"
    dispatcher(id="w2", slots={"*": 1})  # another dispatcher has one free
    assert reason(late_job()) is None


def test_a_queues_own_slots_are_its_own():
    dispatcher(slots={"default": 1, "other": 4})  # --queue default:1 --queue other:4
    running(queue="default")
    assert reason(late_job()) == "no_free_slot"  # the other group's free slots do not serve it
    assert reason(late_job(queue="other")) is None


def test_a_page_of_jobs_is_read_in_a_few_queries_whatever_its_size(django_assert_max_num_queries):
    dispatcher(slots={"*": 1})
    queue("default", paused=True)
    queue("other", rate_limit=1, rate_period=3600.0, concurrency_limit=5)  # the start stays in its window
    QueueStart.objects.create(queue="other", started_at=timezone.now())
    soon = late_job(seconds=-5)
    jobs = list(
        Job.objects.filter(pk__in=[late_job(q).pk for q in ("default", "other", "slow") for _ in range(10)] + [soon.pk])
    )
    with django_assert_max_num_queries(4):
        reasons = lateness.late_reasons(jobs)
    by_queue = {j.queue: reasons[j.pk] for j in jobs if j.execute_at < timezone.now()}
    assert by_queue == {"default": "paused", "other": "rate_limited", "slow": "no_dispatcher"}
    assert reasons[soon.pk] is None
    future = [j for j in jobs if j.execute_at > timezone.now()]
    with django_assert_max_num_queries(0):  # none late: nothing to read
        assert lateness.late_reasons(future) == {future[0].pk: None}
    assert lateness.late_counts() == {"paused": 10, "rate_limited": 10, "no_dispatcher": 10}


def test_the_api_says_why(api, django_assert_max_num_queries):
    queue(paused=True)
    job = late_job()
    assert api.get(f"/api/jobs/{job.pk}/").json()["late_reason"] == "paused"
    late_job(queue="other")
    late_job(seconds=-60)
    body = api.get("/api/jobs/?ordering=id").json()
    assert [j["late_reason"] for j in body["results"]] == ["paused", "no_dispatcher", None]
    with django_assert_max_num_queries(20) as few:
        api.get("/api/jobs/")
    for _ in range(20):
        late_job(queue="slow")
    with django_assert_max_num_queries(len(few.captured_queries)):  # no query per job
        api.get("/api/jobs/")


def test_the_admin_list_page_and_dashboard_say_why(client, superuser, django_assert_max_num_queries):
    client.force_login(superuser)
    queue(paused=True)
    job = late_job()
    dispatcher(slots={"*": 1})
    running(queue="other")
    late_job(queue="other")
    page = client.get("/admin/scheduler_app/job/").content.decode()
    assert page.count('data-late-reason="paused"') == 1 and page.count('data-late-reason="no_free_slot"') == 1
    with django_assert_max_num_queries(60) as few:
        client.get("/admin/scheduler_app/job/")
    for _ in range(10):
        late_job(queue="other")
    with django_assert_max_num_queries(len(few.captured_queries)):  # no query per row
        assert client.get("/admin/scheduler_app/job/").content.decode().count('data-late-reason="no_free_slot"') == 11
    assert "queue paused" in client.get(f"/admin/scheduler_app/job/{job.pk}/change/").content.decode()
    live = client.get(f"/admin/scheduler_app/job/live/?ids={job.pk}").json()
    assert 'data-late-reason="paused"' in live["rows"][str(job.pk)]["execute_at_display"]
    data = client.get("/admin/scheduler_app/dashboard/data/").json()
    assert data["late"] == [
        {"reason": "paused", "label": "queue paused", "count": 1},
        {"reason": "no_free_slot", "label": "no free slot", "count": 11},
    ]
    assert 'data-late-reason="no_free_slot"' in data["html"]["summary"]
    # Upcoming lists what will run: a paused queue's jobs are counted under it, not ranked.
    assert 'data-late-reason="paused"' in data["html"]["summary"]
    assert "1 pending in default" in data["html"]["upcoming"]


def test_a_late_job_its_concurrency_key_holds_back_is_concurrency_limited():
    """The queue could run it (a dispatcher with free slots), but its key's limit is reached: the key is the reason."""
    dispatcher(slots={"*": 4})
    running_job = running()
    Job.objects.filter(pk=running_job.pk).update(concurrency_key="account:1", concurrency_limit=1)
    held = late_job(concurrency_key="account:1", concurrency_limit=1)
    free = late_job(concurrency_key="account:2", concurrency_limit=1)
    assert reason(held) == lateness.CONCURRENCY_LIMITED
    assert reason(free) is None
