"""The store contract, part three: how an attempt ends (one rule), and what a claim and a renewal leave alone.

Every case runs against the in-memory fake and the Django store (both
databases), as in ``test_store_contract.py``.
"""

import pytest

from scheduler_app.vocabulary.jobs import Status, attempt_end
from tests.contract.conftest import BACKOFF, LEASE, at
from tests.contract.test_store_contract import QUEUES, an_error, done


@pytest.mark.parametrize(
    ("ending", "left"),
    [
        (Status.PENDING, Status.CANCELLED),  # a retry
        (Status.FAILED, Status.CANCELLED),
        (Status.SUCCEEDED, Status.SUCCEEDED),  # the work was done: it stands
        (Status.CANCELLED, Status.CANCELLED),
    ],
)
def test_a_job_whose_cancel_was_requested_never_runs_again(harness, store, now, ending, left):
    harness.add(now - 1, max_attempts=3)
    (job,) = store.claim(QUEUES, 1, now)
    harness.request_cancel(job.id)
    error = an_error(job, now) if ending in (Status.PENDING, Status.FAILED) else None
    retry_at = at(now) if ending == Status.PENDING else None
    assert store.finish([done(job, ending, error=error, retry_at=retry_at)], now) == {job.id}
    row = harness.row(job.id)
    assert row["status"] == left == attempt_end(ending, True)
    if error is not None:
        assert row["errors"] == [error]  # the failed attempt is still recorded
    assert store.claim(QUEUES, 5, now + 3600) == []


def test_a_snooze_of_a_job_whose_cancel_was_requested_ends_it(harness, store, now):
    harness.add(now - 1, max_attempts=3)
    (job,) = store.claim(QUEUES, 1, now)
    harness.request_cancel(job.id)
    snooze = done(job, Status.PENDING, retry_at=at(now), snoozed=True)
    assert store.finish([snooze], now) == {job.id}
    assert harness.row(job.id)["status"] == Status.CANCELLED
    assert store.claim(QUEUES, 5, now + 60) == []


def test_a_release_at_shutdown_of_a_job_whose_cancel_was_requested_ends_it(harness, store, now):
    kept = harness.add(now - 2, max_attempts=3)
    stopped = harness.add(now - 1, max_attempts=3)
    jobs = store.claim(QUEUES, 2, now)
    harness.request_cancel(stopped)
    store.register(queues=QUEUES, slots={"*": 2})
    assert store.release(jobs, now) == {kept, stopped}
    store.retire()
    assert harness.peer("contract-b").take_back(now) == (2, 0)
    assert harness.row(kept)["status"] == Status.PENDING and harness.row(kept)["attempts"] == 0
    assert harness.row(stopped)["status"] == Status.CANCELLED
    assert [j.id for j in store.claim(QUEUES, 5, now + 1)] == [kept]


def test_a_rescued_attempt_runs_again_after_its_backoff(harness, store, now):
    job_id = harness.add(now - 1, max_attempts=3)
    store.claim(QUEUES, 1, now)
    rescued_at = now + LEASE + 1
    assert harness.peer("contract-b").rescue(rescued_at) == 1
    assert store.claim(QUEUES, 1, rescued_at + BACKOFF - 1) == []
    (again,) = store.claim(QUEUES, 1, rescued_at + BACKOFF)
    assert (again.id, again.attempt) == (job_id, 2)
    assert again.execute_at == pytest.approx(rescued_at + BACKOFF)


def test_a_claim_never_takes_a_job_its_dispatcher_still_runs(harness, store, now):
    a = harness.add(now - 3)
    b = harness.add(now - 2)
    c = harness.add(now - 1)
    assert [j.id for j in store.claim(QUEUES, 5, now, in_flight=[a, b])] == [c]
    assert [j.id for j in store.claim(QUEUES, 5, now, ids=[a, b], in_flight=[a])] == [b]
    assert [j.id for j in store.claim(QUEUES, 5, now, in_flight=[])] == [a]


def test_a_limited_claim_never_takes_a_job_its_dispatcher_still_runs(harness, store, now):
    harness.set_limits("slow", concurrency=5)
    a = harness.add(now - 3, queue="slow")
    b = harness.add(now - 2, queue="slow")
    c = harness.add(now - 1, queue="default")
    jobs, _ = store.claim_limited(QUEUES, 5, now, in_flight=[a, c])
    assert [j.id for j in jobs] == [b]


def test_a_renewal_extends_only_the_leases_it_names(harness, store, now):
    kept = harness.add(now - 2, max_attempts=3)
    left = harness.add(now - 1, max_attempts=3)
    store.claim(QUEUES, 2, now)
    store.renew(now + LEASE - 1, [kept])
    assert store.rescue(now + LEASE + 1) == 1
    assert harness.row(left)["status"] == Status.PENDING and harness.row(kept)["status"] == Status.RUNNING
