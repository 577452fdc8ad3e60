"""Snooze (a task runs again later without counting an attempt) and unique_for (a key held for a period)."""

import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import override_settings
from django.utils import timezone

from scheduler_app import Snooze, enqueue, lifecycle, options
from scheduler_app.models import Job, UniqueWindow
from scheduler_app.testing import drain
from tests.plumbing import at_once, dispatcher_thread, wait_for
from tests.testapp import tasks

NONE_LEFT = {"succeeded": 0, "failed": 0, "cancelled": 0, "snoozed": 0}


def test_snooze_is_a_pure_exception_with_checked_seconds():
    assert Snooze(2.5).seconds == 2.5
    for bad in (-1, float("nan"), "soon", "-2h", True, 10**12):
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
        Job.objects.filter(pk=held.pk).update(status="failed", finished_at=timezone.now())
        jobs = lifecycle.enqueue_many(
            [
                {"task": "tests.testapp.tasks.add", "args": [1, 1], "unique_key": "k", "unique_for": 60},
                {"task": "tests.testapp.tasks.add", "args": [2, 2], "unique_for": 60},
            ]
        )
        assert jobs[0].pk == held.pk and jobs[1].pk != held.pk

    def test_a_bad_period_is_refused(self):
        with pytest.raises(ValidationError) as caught:
            enqueue("tests.testapp.tasks.add", [1, 2], unique_for=-5)
        assert caught.value.message_dict == {
            "unique_for": [
                "Must be a number of seconds from 0.001 to 31622400, or a duration such as 90s, 2h, 3d or 1h30m."
            ]
        }


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_with_one_key_make_one_job():
    """The primary key settles it: eight threads at once, one job made, all of them answered with it."""
    results = at_once(*[lambda: enqueue("tests.testapp.tasks.add", [1, 2], unique_key="race", unique_for=3600)] * 8)
    assert sum(1 for _, created in results if created) == 1
    assert len({job.pk for job, _ in results}) == 1
    assert Job.objects.count() == 1


def window_of(key):
    return UniqueWindow.objects.values_list("job_id", "expires_at").get(key=key)


@pytest.mark.django_db
class TestCancelledHolders:
    """A cancelled job frees its key, whichever way it was cancelled (the issue: cancelling did not)."""

    def test_cancelling_a_pending_holder_frees_its_key(self):
        held, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="k", unique_for=3600)
        assert lifecycle.cancel(held.pk) == "cancelled"
        again, created = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="k", unique_for=3600)
        assert created and again.pk != held.pk
        assert window_of("k")[0] == again.pk
        # The new holder holds it in turn.
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="k", unique_for=3600) == (again, False)

    def test_cancel_many_and_a_waiting_holder(self):
        first, _ = enqueue("tests.testapp.tasks.add", [1, 2])
        waiting, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="w", unique_for=3600, depends_on=[first.pk])
        assert waiting.status == "waiting"
        assert lifecycle.cancel_many([waiting.pk]) == (1, 0, 0)
        [again] = lifecycle.enqueue_many(
            [{"task": "tests.testapp.tasks.add", "args": [1, 2], "unique_key": "w", "unique_for": 60}]
        )
        assert again.pk != waiting.pk and Job.objects.get(pk=again.pk).status == "pending"

    def test_a_holder_cancelled_by_its_dependency_frees_its_key(self):
        first, _ = enqueue("tests.testapp.tasks.add", [1, 2])
        waiting, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="d", unique_for=3600, depends_on=[first.pk])
        lifecycle.cancel(first.pk)
        assert Job.objects.get(pk=waiting.pk).status == "cancelled"
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="d", unique_for=3600)[1] is True

    def test_a_failed_or_succeeded_holder_keeps_its_key(self):
        held, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="f", unique_for=3600)
        for status in ("failed", "succeeded"):
            Job.objects.filter(pk=held.pk).update(status=status, finished_at=timezone.now())
            assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="f", unique_for=3600) == (held, False)

    def test_a_retried_holder_holds_its_key_again(self):
        held, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="r", unique_for=3600)
        lifecycle.cancel(held.pk)
        lifecycle.retry(held.pk)
        Job.objects.filter(pk=held.pk).update(status="succeeded", finished_at=timezone.now())
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="r", unique_for=3600) == (held, False)


@pytest.mark.django_db(transaction=True)
def test_a_running_holder_that_ends_cancelled_frees_its_key():
    held, _ = enqueue("tests.testapp.tasks.cooperative", [30.0], unique_key="run", unique_for=3600)
    with dispatcher_thread(poll_interval=0.05):
        assert wait_for(lambda: Job.objects.get(pk=held.pk).status == "running", 20)
        assert lifecycle.cancel(held.pk) == "cancel_requested"
        # Still running until the task stops: the key is still held.
        assert wait_for(lambda: Job.objects.get(pk=held.pk).status == "cancelled", 20)
    again, created = enqueue("tests.testapp.tasks.cooperative", [30.0], unique_key="run", unique_for=3600)
    assert created and again.pk != held.pk
    lifecycle.cancel(again.pk)


@pytest.mark.django_db(transaction=True)
def test_enqueues_racing_for_a_freed_key_make_one_job():
    """Eight threads at once for the key of a cancelled job: the window's primary key lets one take it."""
    held, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="freed", unique_for=3600)
    lifecycle.cancel(held.pk)
    results = at_once(*[lambda: enqueue("tests.testapp.tasks.add", [1, 2], unique_key="freed", unique_for=3600)] * 8)
    assert sum(1 for _, created in results if created) == 1
    [winner] = {job.pk for job, _ in results}
    assert winner != held.pk and window_of("freed")[0] == winner


@pytest.mark.django_db
class TestWindowsAreNotStretched:
    """A later job's unique_for never extends an earlier holder's window."""

    def test_a_duplicate_with_a_longer_period_leaves_the_window_as_it_was(self):
        now = timezone.now()
        holder, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="s", unique_for=60, now=now)
        before = window_of("s")
        assert before == (holder.pk, now + timedelta(seconds=60))
        later = now + timedelta(seconds=30)
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="s", unique_for=366 * 86400, now=later) == (
            holder,
            False,
        )
        assert window_of("s") == before
        # Not while the holder is active, nor once it finished, nor in a bulk request.
        Job.objects.filter(pk=holder.pk).update(status="succeeded", finished_at=later)
        assert (
            enqueue("tests.testapp.tasks.add", [1, 2], unique_key="s", unique_for=366 * 86400, now=later)[0] == holder
        )
        [same] = lifecycle.enqueue_many(
            [{"task": "tests.testapp.tasks.add", "args": [1, 2], "unique_key": "s", "unique_for": 366 * 86400}]
        )
        assert same.pk == holder.pk and window_of("s") == before

    def test_a_key_without_a_period_respects_a_window(self):
        """At most one job made per key within the period: a plain unique_key does not slip past the window."""
        holder, _ = enqueue("tests.testapp.tasks.add", [1, 2], unique_key="p", unique_for=3600)
        Job.objects.filter(pk=holder.pk).update(status="succeeded", finished_at=timezone.now())
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="p") == (holder, False)
        jobs = lifecycle.enqueue_many(
            [
                {"task": "tests.testapp.tasks.add", "args": [1, 2], "unique_key": "p"},
                {"task": "tests.testapp.tasks.add", "args": [1, 2], "unique_key": "q"},
            ]
        )
        assert jobs[0].pk == holder.pk and jobs[1].pk != holder.pk
        other, _ = enqueue("tests.testapp.tasks.add", [1, 2])
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="p", depends_on=[other.pk]) == (holder, False)
        # An expired window, or a cancelled holder's, lets it through.
        UniqueWindow.objects.filter(key="p").update(expires_at=timezone.now() - timedelta(seconds=1))
        assert enqueue("tests.testapp.tasks.add", [1, 2], unique_key="p")[1] is True


@pytest.mark.django_db
class TestTheTasksPeriodIsTheLongest:
    """The 366-day case: a job held its task's key far longer than the task's @options(unique_for) said."""

    def test_a_job_may_shorten_its_tasks_period_not_lengthen_it(self):
        with pytest.raises(ValidationError) as caught:
            enqueue("tests.testapp.tasks.once_a_minute", [1], unique_for=366 * 86400)
        assert caught.value.message_dict == {
            "unique_for": [
                "Must be at most 60 seconds: the task's @options(unique_for=...) is the longest a job of it may hold its unique key."
            ]
        }
        assert not Job.objects.exists() and not UniqueWindow.objects.exists()
        job, created = enqueue("tests.testapp.tasks.once_a_minute", [1], unique_for=30)
        assert created and window_of(job.unique_key)[1] == job.created_at + timedelta(seconds=30)
        with pytest.raises(lifecycle.BulkValidationError) as bulk:
            lifecycle.enqueue_many([{"task": "tests.testapp.tasks.once_a_minute", "args": [2], "unique_for": 61}])
        assert list(bulk.value.by_index[0]) == ["unique_for"]
