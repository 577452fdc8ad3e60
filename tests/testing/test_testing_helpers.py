"""scheduler_app.testing: drain, enqueued, assert_enqueued, refute_enqueued, and the pytest fixture.

As a user's tests use them: inside an ordinary TestCase (one transaction,
nothing committed) and a TransactionTestCase, on SQLite and PostgreSQL.
"""

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import TestCase, TransactionTestCase
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.testing import assert_enqueued, drain, enqueued, refute_enqueued
from tests.testapp import tasks

NONE_LEFT = {"succeeded": 0, "failed": 0, "cancelled": 0, "snoozed": 0}


class DrainInATestCase(TestCase):
    def test_runs_due_jobs_through_the_service(self):
        tasks.add.enqueue(2, 3)
        tasks.add.using(priority=50).enqueue(10, 10)
        assert drain() == {**NONE_LEFT, "succeeded": 2}
        jobs = list(Job.objects.order_by("started_at", "id"))
        # Claim order: the higher priority first.
        assert [j.result for j in jobs] == [20, 5]
        assert all(j.status == "succeeded" and j.attempts == 1 for j in jobs)
        assert drain() == NONE_LEFT

    def test_a_task_that_fails_twice_then_succeeds(self):
        key = uuid.uuid4().hex
        result = tasks.fails_twice.enqueue(key)
        assert drain() == {**NONE_LEFT, "succeeded": 1}
        job = Job.objects.get(pk=int(result.id))
        assert (job.status, job.attempts, job.result) == ("succeeded", 3, 3)
        assert [e["message"] for e in job.errors] == ["failure 1", "failure 2"]

    def test_without_retries_a_failed_attempt_stays_pending_at_its_backoff(self):
        key = uuid.uuid4().hex
        tasks.fails_twice.enqueue(key)
        # A backoff no drain outlasts (the suite's 0.05 s could pass within it on a loaded machine).
        with self.settings(SCHEDULER={**settings.SCHEDULER, "RETRY_BACKOFF_BASE": 600.0}):
            assert drain(with_retries=False) == NONE_LEFT
        job = Job.objects.get()
        assert (job.status, job.attempts) == ("pending", 1) and job.execute_at > timezone.now() + timedelta(seconds=60)

    def test_failures_and_cancellations_are_counted(self):
        tasks.boom.using().enqueue("no")
        lifecycle.enqueue("tests.testapp.tasks.boom", ["x"], max_attempts=1)
        tasks.unserializable.enqueue()
        summary = drain()
        assert summary["failed"] == 3 and summary["succeeded"] == 0

    def test_scheduled_jobs_run_only_with_with_scheduled_in_time_order(self):
        now = timezone.now()
        later = tasks.add.using(run_after=now + timedelta(hours=2), priority=90).enqueue(1, 1)
        sooner = tasks.add.using(run_after=now + timedelta(hours=1)).enqueue(2, 2)
        assert drain() == NONE_LEFT
        assert drain(with_scheduled=True) == {**NONE_LEFT, "succeeded": 2}
        ran = list(Job.objects.order_by("started_at", "id").values_list("pk", flat=True))
        assert ran == [int(sooner.id), int(later.id)]

    def test_paused_queues_and_one_queue(self):
        lifecycle.pause_queue("slow")
        tasks.with_options.enqueue(1)  # queue slow
        tasks.add.enqueue(1, 1)
        assert drain(queue="default") == {**NONE_LEFT, "succeeded": 1}
        assert drain() == {**NONE_LEFT, "succeeded": 1}

    def test_enqueued_and_the_assertions(self):
        tasks.add.enqueue(1, 2)
        tasks.add.enqueue(3, 4)
        assert len(enqueued(tasks.add)) == 2
        assert [j.args for j in enqueued("tests.testapp.tasks.add", args=[3, 4])] == [[3, 4]]
        assert_enqueued(tasks.add, args=(1, 2))
        assert_enqueued(tasks.add, count=2)
        refute_enqueued(tasks.add, args=[9, 9])
        with pytest.raises(AssertionError) as info:
            assert_enqueued(tasks.add, args=[9, 9])
        message = str(info.value)
        assert "Expected a pending job matching tests.testapp.tasks.add args=[9, 9], found 0." in message
        assert "tests.testapp.tasks.add args=[1, 2]" in message and "args=[3, 4]" in message
        with pytest.raises(AssertionError, match="Expected no pending job matching tests.testapp.tasks.add"):
            refute_enqueued(tasks.add)
        drain()
        refute_enqueued(tasks.add)
        with pytest.raises(AssertionError, match="Nothing is enqueued."):
            assert_enqueued(tasks.add)


class DrainInATransactionTestCase(TransactionTestCase):
    def test_committed_jobs_drain_as_well(self):
        tasks.add.enqueue(20, 22)
        assert drain() == {**NONE_LEFT, "succeeded": 1}
        assert Job.objects.get().result == 42


@pytest.mark.django_db
def test_the_pytest_fixture(scheduler):
    tasks.add.enqueue(1, 1)
    scheduler.assert_enqueued(tasks.add, args=[1, 1])
    assert scheduler.drain() == {**NONE_LEFT, "succeeded": 1}
    scheduler.refute_enqueued(tasks.add)
    assert scheduler.enqueued() == []


def test_drain_counts_the_dependents_a_failure_cancelled(db):
    from scheduler_app import enqueue

    failing, _ = enqueue("tests.testapp.tasks.boom", max_attempts=1)
    child, _ = enqueue("tests.testapp.tasks.noop", depends_on=[failing])
    enqueue("tests.testapp.tasks.noop", depends_on=[child])
    assert drain() == {"succeeded": 0, "failed": 1, "cancelled": 2, "snoozed": 0}
