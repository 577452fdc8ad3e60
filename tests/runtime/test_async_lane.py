"""The asyncio lane (``mode: "async"``): ``async def`` tasks of an async queue on one event loop per dispatcher.

A dispatcher on a thread of the test (``dispatcher_thread``), the database
real: many attempts overlap on one loop thread, a timeout and a cancel cancel
the coroutine for real and are recorded as on a thread, logs and progress
are written while they run, a sync task sent to an async queue runs on a
worker thread.
"""

import sys
import threading

import pytest
from django.tasks.signals import task_finished, task_started

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobLog
from scheduler_app.vocabulary.policy import TIMEOUT_CLASS
from tests.plumbing import dispatcher_thread, manage_in_process, wait_for
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."


@pytest.fixture
def seen():
    tasks.lane_seen.clear()
    yield tasks.lane_seen
    tasks.lane_seen.clear()


def lane(slots=200, **options):
    """A dispatcher whose "other" queue is async, with ``slots`` of its own, and one thread slot for "default"."""
    groups = {"other": ({"other"}, slots), "default": ({"default"}, 1)}
    return dispatcher_thread(groups, async_queues={"other"}, **options)


def statuses(jobs):
    return [Job.objects.get(pk=job.pk).status for job in jobs]


def test_a_hundred_async_jobs_overlap_on_one_loop_thread(seen):
    jobs = lifecycle.enqueue_many(
        [{"task": T + "async_overlap", "args": ["many", 100], "queue": "other"} for _ in range(100)]
    )
    with lane() as dispatcher:
        done = lambda: set(statuses(jobs)) == {"succeeded"}  # noqa: E731
        assert wait_for(done, 120), statuses(jobs)
        threads = set(dispatcher.pool.live_threads())
    assert len(seen["many"]["threads"]) == 1
    # Every one ran on the lane's thread, none on a worker thread of the pool (it started none).
    assert not [t for t in threads if t.name.startswith("scheduler-other-")]
    # They overlapped: each waited until all 100 ran at once (a hang guard of 60 s otherwise).
    assert seen["many"]["most"] == 100


def test_a_timeout_cancels_the_coroutine_and_is_recorded_as_on_a_thread(seen):
    job, _ = lifecycle.enqueue(T + "async_waits", ["late", 60.0], queue="other", timeout=1, max_attempts=1)
    with lane():
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "failed", 60)
        # The coroutine itself was cancelled: CancelledError reached it.
        assert wait_for(lambda: seen["late"]["cancelled"] == 1, 30)
    job.refresh_from_db()
    assert [e["exception_class"] for e in job.errors] == [TIMEOUT_CLASS]
    assert seen["late"]["ended"] == 0


def test_a_timed_out_attempt_with_attempts_left_is_retried(seen):
    job, _ = lifecycle.enqueue(T + "async_waits", ["again", 60.0], queue="other", timeout=1, max_attempts=2)
    with lane():
        assert wait_for(lambda: Job.objects.get(pk=job.pk).attempts == 2, 60)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "failed", 60)
    job.refresh_from_db()
    assert [e["exception_class"] for e in job.errors] == [TIMEOUT_CLASS, TIMEOUT_CLASS]
    assert seen["again"]["cancelled"] == 2


def test_an_operator_cancel_cancels_the_running_coroutine(seen):
    job, _ = lifecycle.enqueue(T + "async_waits", ["stop", 60.0], queue="other", max_attempts=3)
    with lane():
        assert wait_for(lambda: "stop" in seen and Job.objects.get(pk=job.pk).status == "running", 60)
        lifecycle.cancel(job.pk)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "cancelled", 60)
    assert seen["stop"]["cancelled"] == 1 and seen["stop"]["ended"] == 0
    job.refresh_from_db()
    assert job.attempts == 1


def test_logs_are_written_while_the_coroutine_runs(seen):
    job, _ = lifecycle.enqueue(T + "async_waits", ["logs", 60.0], queue="other", max_attempts=1)
    with lane():
        # The flusher writes it within a second or so, while the attempt still awaits.
        line = lambda: JobLog.objects.filter(job_id=job.pk, message="async logs waiting").exists()  # noqa: E731
        assert wait_for(line, 60)
        assert Job.objects.get(pk=job.pk).status == "running"
        lifecycle.cancel(job.pk)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "cancelled", 60)
    assert JobLog.objects.filter(job_id=job.pk, message="async logs waiting").count() == 1


def test_progress_on_the_loop_and_awaited():
    job, _ = lifecycle.enqueue(T + "async_progress", [3], queue="other", max_attempts=1)
    with lane():
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", 60)
    job.refresh_from_db()
    assert job.result is True
    assert job.progress["current"] == 3 and job.progress["message"] == "awaited"
    messages = list(JobLog.objects.filter(job_id=job.pk).values_list("message", flat=True))
    assert messages == ["progress written: True"]


def test_a_sync_task_on_an_async_queue_runs_on_a_worker_thread():
    sync_job, _ = lifecycle.enqueue(T + "thread_name", queue="other", max_attempts=1)
    async_job, _ = lifecycle.enqueue(T + "async_thread_name", queue="other", max_attempts=1)
    with lane():
        done = lambda: statuses([sync_job, async_job]) == ["succeeded", "succeeded"]  # noqa: E731
        assert wait_for(done, 60), statuses([sync_job, async_job])
    sync_job.refresh_from_db()
    async_job.refresh_from_db()
    assert sync_job.result.startswith("scheduler-other-")  # a worker thread of the queue's slot group
    assert async_job.result == "scheduler-asyncio"


def test_an_async_task_of_a_thread_queue_still_runs_on_a_thread():
    job, _ = lifecycle.enqueue(T + "async_add", [2, 3], queue="default", max_attempts=1)
    with lane() as dispatcher:
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", 60)
        assert dispatcher.pool._lane.live_thread() is None  # the lane never started
    job.refresh_from_db()
    assert job.result == 5


def test_the_command_line_makes_a_queue_async_and_the_banner_says_so():
    job, _ = lifecycle.enqueue(T + "async_thread_name", queue="other", max_attempts=1)
    code, out, err = manage_in_process("rundispatcher", "--burst", "--queue", "other:5:async", "--queue", "default")
    assert code in (0, None), err
    assert "on an asyncio loop: other" in out and "other:5" in out, out
    job.refresh_from_db()
    assert job.status == "succeeded" and job.result == "scheduler-asyncio"


def test_the_setting_makes_a_queue_async(settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "QUEUES": {"other": {"mode": "async"}}}
    on_lane, _ = lifecycle.enqueue(T + "async_thread_name", queue="other", max_attempts=1)
    on_thread, _ = lifecycle.enqueue(T + "async_thread_name", queue="default", max_attempts=1)
    code, out, err = manage_in_process("rundispatcher", "--burst")
    assert code in (0, None), err
    assert "on an asyncio loop: other" in out, out
    on_lane.refresh_from_db()
    on_thread.refresh_from_db()
    assert on_lane.result == "scheduler-asyncio"
    assert on_thread.status == "succeeded" and on_thread.result != "scheduler-asyncio"  # asgiref's, for a thread


def test_a_running_coroutines_lease_is_renewed(seen):
    job, _ = lifecycle.enqueue(T + "async_waits", ["lease", 60.0], queue="other", max_attempts=1)
    with lane(lease=1.5):
        assert wait_for(lambda: "lease" in seen and Job.objects.get(pk=job.pk).lease_expires_at is not None, 60)
        first = Job.objects.get(pk=job.pk).lease_expires_at
        assert wait_for(lambda: Job.objects.get(pk=job.pk).lease_expires_at > first, 30)
        lifecycle.cancel(job.pk)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "cancelled", 60)
    job.refresh_from_db()
    assert job.attempts == 1 and seen["lease"]["cancelled"] == 1


def test_an_error_is_recorded_and_task_finished_is_sent_inside_its_handler():
    heard = []

    def started(sender, task_result, **kwargs):
        heard.append(("started", str(task_result.status), threading.current_thread().name))

    def finished(sender, task_result, **kwargs):
        heard.append(("finished", str(task_result.status), sys.exc_info()[0]))

    task_started.connect(started, weak=False)
    task_finished.connect(finished, weak=False)
    try:
        job, _ = lifecycle.enqueue(T + "async_boom", ["no luck"], queue="other", max_attempts=1)
        with lane():
            assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "failed", 60)
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    job.refresh_from_db()
    assert job.errors[-1]["exception_class"] == "builtins.ValueError" and job.errors[-1]["message"] == "no luck"
    # Sent off the loop (a receiver may use the ORM), the error's handler around task_finished.
    assert heard == [("started", "RUNNING", "scheduler-asyncio-io"), ("finished", "FAILED", ValueError)]


def test_a_snooze_runs_it_again_without_counting_an_attempt(seen):
    job, _ = lifecycle.enqueue(T + "async_snoozer", ["nap"], queue="other", max_attempts=1)
    with lane():
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", 60)
    job.refresh_from_db()
    assert job.result == 2 and job.attempts == 1 and job.errors == []
    # The second run's records are numbered after the snoozed run's (the stored count, read off the loop).
    assert list(JobLog.objects.filter(job_id=job.pk).order_by("seq").values_list("message", flat=True)) == [
        "run 1",
        "run 2",
    ]
