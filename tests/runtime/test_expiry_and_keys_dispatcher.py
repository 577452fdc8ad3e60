"""A dispatcher with expiring and keyed jobs: an expired job never runs and its maintenance ends it; held keys wait."""

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.dispatcher.fakes import FakeClock
from tests.plumbing import ADD, count_claims, dispatcher_thread, run_until, settle, ticking_dispatcher, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SPAN = "tests.testapp.tasks.span"
HOLD = "tests.testapp.tasks.logs_then_waits"  # runs until marker_dir/release exists


def test_a_job_due_after_its_expiry_never_runs_and_the_dispatcher_cancels_it():
    now = timezone.now()
    doomed = lifecycle.enqueue(
        ADD, [1, 2], execute_at=now + timedelta(seconds=1), expires_at=now + timedelta(seconds=0.5)
    )[0]
    fine = lifecycle.enqueue(ADD, [3, 4], execute_at=now + timedelta(seconds=1), expires_in=60)[0]
    with dispatcher_thread(lease=1.5):
        assert wait_for(lambda: Job.objects.get(pk=fine.pk).status == "succeeded", 30)
        assert wait_for(lambda: Job.objects.get(pk=doomed.pk).status == "cancelled", 30)
    doomed.refresh_from_db()
    assert doomed.attempts == 0 and doomed.started_at is None
    assert doomed.errors[-1]["message"].startswith("Expired: not started by ")


def test_a_dispatcher_runs_one_job_of_a_key_at_a_time(marker_dir):
    jobs = [
        lifecycle.enqueue(SPAN, [marker_dir, 1.0], concurrency_key="acct", concurrency_limit=1)[0] for _ in range(3)
    ]
    others = [lifecycle.enqueue(SPAN, [marker_dir, 0.05])[0] for _ in range(3)]
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.filter(status="succeeded").count() == 6, 30)
    rows = {j.pk: (j.started_at, j.finished_at) for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    spans = sorted(rows.values())
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))  # one at a time
    assert all(Job.objects.get(pk=o.pk).finished_at < spans[-1][0] for o in others)  # not held behind the key


def test_a_held_key_is_not_asked_again_on_every_wake_up(marker_dir):
    """The database's keyed claim, driven at a fake time: a full key waits for its retry interval."""
    held, _ = lifecycle.enqueue(HOLD, [marker_dir, 0, 0, 60.0], concurrency_key="acct", concurrency_limit=1)
    waiting, _ = lifecycle.enqueue(ADD, [1, 2], concurrency_key="acct", concurrency_limit=1)
    clock = FakeClock(float(int(time.time())) + 2)  # a whole second at which both are due
    with ticking_dispatcher(clock, poll_interval=0.5) as dispatcher:
        try:
            assert settle(dispatcher, clock, lambda: Job.objects.get(pk=held.pk).status == "running")
            claims = count_claims(dispatcher.store)
            waits = [dispatcher.tick(clock.time() + k * 0.009) for k in range(50)]
            # Fifty wake-ups within the retry interval: at most the one try that found the key full.
            assert len(claims) <= 1 and min(waits) > 0
            assert Job.objects.get(pk=waiting.pk).status == "pending"
        finally:
            open(os.path.join(marker_dir, "release"), "w").close()
        assert run_until(
            dispatcher, clock, lambda: Job.objects.get(pk=waiting.pk).status == "succeeded", until=clock.time() + 60
        )
