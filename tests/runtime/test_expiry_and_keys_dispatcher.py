"""A dispatcher with expiring and keyed jobs: an expired job never runs and its maintenance ends it; held keys wait."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import ADD, dispatcher_thread, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SPAN = "tests.testapp.tasks.span"


def test_a_job_due_after_its_expiry_never_runs_and_the_dispatcher_cancels_it():
    now = timezone.now()
    doomed = lifecycle.enqueue(ADD, [1, 2], execute_at=now + timedelta(seconds=1), expires_at=now + timedelta(seconds=0.5))[0]
    fine = lifecycle.enqueue(ADD, [3, 4], execute_at=now + timedelta(seconds=1), expires_in=60)[0]
    with dispatcher_thread(lease=1.5):
        assert wait_for(lambda: Job.objects.get(pk=fine.pk).status == "succeeded", 30)
        assert wait_for(lambda: Job.objects.get(pk=doomed.pk).status == "cancelled", 30)
    doomed.refresh_from_db()
    assert doomed.attempts == 0 and doomed.started_at is None
    assert doomed.errors[-1]["message"].startswith("Expired: not started by ")


def test_a_dispatcher_runs_one_job_of_a_key_at_a_time_without_spinning(marker_dir):
    jobs = [
        lifecycle.enqueue(SPAN, [marker_dir, 1.0], concurrency_key="acct", concurrency_limit=1)[0] for _ in range(3)
    ]
    others = [lifecycle.enqueue(SPAN, [marker_dir, 0.05])[0] for _ in range(3)]
    with dispatcher_thread() as dispatcher:
        assert wait_for(lambda: Job.objects.filter(status="running").count() == 1, 30)
        ticks = dispatcher.test_ticks[0]
        before = len(ticks)
        time.sleep(0.4)
        # Two jobs held by their key, one running: the loop waits (polls at 0.2 s), it does not spin.
        assert Job.objects.filter(status="pending").count() == 2
        assert len(ticks) - before < 30
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 6, 30)
    rows = {j.pk: (j.started_at, j.finished_at) for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    spans = sorted(rows.values())
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))  # one at a time
    assert all(Job.objects.get(pk=o.pk).finished_at < spans[-1][0] for o in others)  # not held behind the key
