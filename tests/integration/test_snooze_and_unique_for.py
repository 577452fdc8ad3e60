"""Snooze (a task runs again later without counting an attempt) and unique_for (a key held for a period)."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from scheduler_app import Snooze, enqueue, lifecycle, options
from scheduler_app.models import Job, UniqueWindow
from scheduler_app.testing import drain
from tests.testapp import tasks

from .helpers import dispatcher_thread, wait_for

NONE_LEFT = {"succeeded": 0, "failed": 0, "cancelled": 0, "snoozed": 0}


def test_snooze_is_a_pure_exception_with_checked_seconds():
    assert Snooze(2.5).seconds == 2.5
    for bad in (-1, float("nan"), "10", True, 10**12):
        with pytest.raises(ValueError):
            Snooze(bad)


@pytest.mark.django_db
class TestSnooze:
    def test_a_snooze_counts_no_attempt_and_leaves_no_error(self):
        job = Job.objects.get(pk=int(tasks.snoozer.enqueue(uuid.uuid4().hex, times=2, seconds=30).id))
        assert drain() == {**NONE_LEFT, "snoozed": 1}
        job.refresh_from_db()
        assert (job.status, job.attempts, job.snoozes, job.errors) == ("pending", 0, 1, [])
        assert job.execute_at > timezone.now() + timedelta(seconds=25)
        assert job.started_at is not None and job.finished_at is None
        # Only with_scheduled runs it again: its new time is later.
        assert drain(with_scheduled=True) == {**NONE_LEFT, "snoozed": 1, "succeeded": 1}
        job.refresh_from_db()
        assert (job.status, job.attempts, job.snoozes, job.result) == ("succeeded", 1, 2, 2)

    def test_context_snooze_does_the_same(self):
        tasks.snoozer.enqueue(uuid.uuid4().hex, times=1, use_context=True)
        assert drain(with_scheduled=True) == {**NONE_LEFT, "snoozed": 1, "succeeded": 1}

    @override_settings(SCHEDULER={"MAX_SNOOZES": 3})
    def test_past_the_limit_the_snooze_fails_the_attempt(self):
        job = Job.objects.get(pk=int(tasks.always_snooze.using().enqueue().id))
        Job.objects.filter(pk=job.pk).update(max_attempts=1)
        assert drain(with_scheduled=True) == {**NONE_LEFT, "snoozed": 3, "failed": 1}
        job.refresh_from_db()
        assert (job.status, job.snoozes, job.attempts) == ("failed", 3, 1)
        [error] = job.errors
        assert error["exception_class"] == "scheduler_app.lifecycle.SnoozedTooOften"
        assert "snoozed too often" in error["message"]


@pytest.mark.django_db(transaction=True)
def test_a_dispatcher_runs_a_snoozed_job_again_at_its_time():
    job = Job.objects.get(pk=int(tasks.snoozer.enqueue(uuid.uuid4().hex, times=1, seconds=0.3).id))
    with dispatcher_thread(poll_interval=0.1):
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "succeeded", 20)
    job.refresh_from_db()
    assert (job.attempts, job.snoozes, job.errors) == (1, 1, [])
    assert job.finished_at - job.started_at >= timedelta(seconds=0.3)


@pytest.mark.django_db
class TestUniqueFor:
    def test_a_key_is_held_for_the_period_whatever_the_status(self):
        first, created = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="daily", unique_for=60)
        assert created
        assert drain() == {**NONE_LEFT, "succeeded": 1}
        again, created = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="daily", unique_for=60)
        assert (again.pk, created) == (first.pk, False)
        # Once the period is over, the key is free again.
        UniqueWindow.objects.filter(key="daily").update(expires_at=timezone.now() - timedelta(seconds=1))
        later, created = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="daily", unique_for=60)
        assert created and later.pk != first.pk
        assert UniqueWindow.objects.get(key="daily").job_id == later.pk

    def test_options_unique_for_makes_the_key_from_the_arguments(self):
        a = tasks.once_a_minute.enqueue(1)
        b = tasks.once_a_minute.enqueue(1)
        c = tasks.once_a_minute.enqueue(2)
        assert a.id == b.id != c.id
        assert Job.objects.get(pk=int(a.id)).unique_key.startswith("tests.testapp.tasks.once_a_minute:")
        with pytest.raises(ImproperlyConfigured, match="unique_for: Must be a number of seconds"):
            options(unique_for=0)

    def test_bulk_returns_the_holder_in_place(self):
        held, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="k", unique_for=60)
        lifecycle.cancel(held.pk)
        jobs = lifecycle.enqueue_many(
            [{"task": "tests.testapp.tasks.add", "args": [1, 1], "unique_key": "k", "unique_for": 60},
             {"task": "tests.testapp.tasks.add", "args": [2, 2], "unique_for": 60}]
        )
        assert jobs[0].pk == held.pk and jobs[1].pk != held.pk

    def test_a_bad_period_is_refused(self):
        with pytest.raises(ValidationError) as caught:
            enqueue("tests.testapp.tasks.add", [1, 2], unique_for=-5)
        assert caught.value.message_dict == {"unique_for": ["Must be a number of seconds from 0.001 to 31622400."]}


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_with_one_key_make_one_job():
    """The primary key settles it: eight threads at once, one job made, all of them answered with it."""
    barrier = threading.Barrier(8)
    results, errors = [], []

    def make():
        try:
            barrier.wait()
            results.append(enqueue("tests.testapp.tasks.add", [1, 2], unique_key="race", unique_for=3600))
        except Exception as exc:  # noqa: BLE001  (surfaced below)
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sum(1 for _, created in results if created) == 1
    assert len({job.pk for job, _ in results}) == 1
    assert Job.objects.count() == 1
