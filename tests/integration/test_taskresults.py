"""Jobs as django.tasks reports them: the times of a TaskResult."""

from datetime import timedelta

import pytest
from django.tasks import task_backends
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.dispatcher.policy import RetryPolicy
from scheduler_app.dispatcher.types import Outcome
from scheduler_app.models import Job
from tests.testapp import tasks as t

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"
QUEUES = ["default", "slow", "other"]


# -- started_at, last_attempted_at, run_after ------------------------------


def claim(worker, now):
    return lifecycle.claim(worker, queues=QUEUES, limit=1, lease=30, now=now)


def test_started_at_is_the_first_attempt_and_last_attempted_at_the_latest():
    result = t.add.enqueue(1, 2)
    first_at = timezone.now()
    (first,) = claim("a", first_at)
    retry = RetryPolicy(base=0.0, jitter=0.0).raised(first, RuntimeError("x"), first_at)
    lifecycle.finish([retry], now=first_at)
    second_at = first_at + timedelta(seconds=5)
    claim("b", second_at)
    job = Job.objects.get(pk=int(result.id))
    assert (job.started_at, job.last_attempted_at) == (first_at, second_at)
    fetched = t.add.get_result(result.id)
    assert (fetched.started_at, fetched.last_attempted_at) == (first_at, second_at)
    lifecycle.finish([Outcome(job.pk, "b", 2, "succeeded", result_json="3")], now=second_at + timedelta(seconds=2))
    assert Job.objects.get(pk=job.pk).duration == timedelta(seconds=2)  # the last attempt's


def test_run_after_only_for_deferred_jobs():
    now_job = t.add.enqueue(1, 1)
    assert now_job.task.run_after is None
    assert t.add.get_result(now_job.id).task.run_after is None
    when = timezone.now() + timedelta(hours=2)
    later = t.add.using(run_after=when).enqueue(1, 1)
    assert later.task.run_after == when and t.add.get_result(later.id).task.run_after == when
    job, _ = lifecycle.enqueue(ADD, [1, 1])  # the admin, the API, the command: same rule
    assert task_backends["default"].get_result(str(job.pk)).task.run_after is None
    moved = lifecycle.reschedule(job.pk, execute_at=when)
    assert task_backends["default"].get_result(str(moved.pk)).task.run_after == when
