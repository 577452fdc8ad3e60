"""The dispatcher loop, ``rundispatcher --burst`` and ``testing.drain()`` run the same jobs.

One job with a concurrency key, one in a limited queue and one plain job go
through each of the three, on both databases: each ends succeeded (drain
ran only jobs without a key before; a dispatcher ran all three).
"""

import pytest

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.testing import drain
from tests.plumbing import ADD, dispatcher_thread, run_manage, wait_for

LIMITED = "slow"


def three_jobs():
    lifecycle.set_limits(LIMITED, concurrency_limit=1, rate_limit=10, rate_period=1.0)
    keyed = lifecycle.enqueue(ADD, [1, 1], concurrency_key="acct:1")[0]
    limited = lifecycle.enqueue(ADD, [2, 2], queue=LIMITED)[0]
    plain = lifecycle.enqueue(ADD, [3, 3])[0]
    return [keyed.pk, limited.pk, plain.pk]


def outcomes(ids):
    return list(Job.objects.filter(pk__in=ids).order_by("pk").values_list("status", "result"))


EXPECTED = [("succeeded", 2), ("succeeded", 4), ("succeeded", 6)]


@pytest.mark.django_db
def test_drain_runs_a_keyed_a_limited_and_a_plain_job():
    ids = three_jobs()
    assert drain() == {"succeeded": 3, "failed": 0, "cancelled": 0, "snoozed": 0}
    assert outcomes(ids) == EXPECTED


@pytest.mark.django_db(transaction=True)
def test_the_dispatcher_loop_runs_a_keyed_a_limited_and_a_plain_job():
    ids = three_jobs()
    with dispatcher_thread(poll_interval=0.05):
        assert wait_for(lambda: outcomes(ids) == EXPECTED, timeout=60), outcomes(ids)


@pytest.mark.django_db(transaction=True)
def test_a_burst_runs_a_keyed_a_limited_and_a_plain_job():
    ids = three_jobs()
    done = run_manage("rundispatcher", "--burst")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert outcomes(ids) == EXPECTED
