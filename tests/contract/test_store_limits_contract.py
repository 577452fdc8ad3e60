"""The store contract, continued: limited queues, their claim, and snoozes (the fake and DjangoStore alike).

What no single store can show is tested with processes instead: several
dispatchers obeying one limit at once (tests/runtime/test_limit_processes.py).
"""

import pytest

from scheduler_app.vocabulary.jobs import Outcome, Status
from tests.contract.conftest import at

QUEUES = frozenset({"default", "slow"})


def ids(jobs):
    return [job.id for job in jobs]


def test_limited_queues_are_those_with_a_limit(harness, store):
    assert store.limited_queues() == set()
    harness.set_limits("slow", concurrency=2)
    harness.set_limits("default", rate=5, period=60)
    assert store.limited_queues() == {"slow", "default"}
    harness.set_limits("default")
    assert store.limited_queues() == {"slow"}


def test_the_plain_claim_leaves_limited_queues_to_the_limited_claim(harness, store, now):
    harness.set_limits("slow", concurrency=5)
    limited = harness.add(now - 2, queue="slow", priority=50)
    plain = harness.add(now - 1)
    assert ids(store.claim(QUEUES, 5, now)) == [plain]
    assert ids(store.claim(QUEUES, 5, now, ids=[limited])) == []
    jobs, full = store.claim_limited(QUEUES, 5, now)
    assert ids(jobs) == [limited] and full == {}


def test_a_concurrency_limit_holds_across_dispatchers_in_claim_order(harness, store, now):
    harness.set_limits("slow", concurrency=2)
    slow = [harness.add(now - 10 + i, queue="slow") for i in range(4)]
    high = harness.add(now - 1, priority=5)
    low = harness.add(now - 1, priority=-5)
    jobs, full = store.claim_limited(QUEUES, 2, now)
    assert ids(jobs) == [high, slow[0]] and full == {}
    other = harness.peer("contract-b")
    jobs, full = other.claim_limited(QUEUES, 4, now)
    assert ids(jobs) == [slow[1], low] and full == {"slow": None}
    assert other.claim_limited(QUEUES, 4, now) == ([], {"slow": None})
    # Outcomes recorded by the claim end their attempts before it counts.
    done = Outcome(slow[0], store.worker_id, 1, Status.SUCCEEDED, result_json="3")
    jobs, full = store.claim_limited(QUEUES, 4, now, finished=[done])
    assert ids(jobs) == [slow[2]] and full == {"slow": None}
    assert harness.row(slow[0])["status"] == Status.SUCCEEDED


def test_a_rate_limit_counts_starts_in_a_sliding_window_and_says_when_it_turns(harness, store, now):
    harness.set_limits("slow", rate=2, period=10)
    slow = [harness.add(now - 20 + i, queue="slow") for i in range(5)]
    assert ids(store.claim_limited(QUEUES, 1, now)[0]) == [slow[0]]
    jobs, full = harness.peer("contract-b").claim_limited(QUEUES, 3, now + 4)
    assert ids(jobs) == [slow[1]] and full == {"slow": pytest.approx(now + 10, abs=1e-3)}
    assert store.claim_limited(QUEUES, 3, now + 9.5) == ([], {"slow": pytest.approx(now + 10, abs=1e-3)})
    jobs, full = store.claim_limited(QUEUES, 3, now + 10.5)
    assert ids(jobs) == [slow[2]] and full == {"slow": pytest.approx(now + 14, abs=1e-3)}


def test_both_limits_at_once_concurrency_first(harness, store, now):
    harness.set_limits("slow", concurrency=1, rate=10, period=60)
    a, b = harness.add(now - 2, queue="slow"), harness.add(now - 1, queue="slow")
    jobs, full = store.claim_limited({"slow"}, 4, now)
    assert ids(jobs) == [a] and full == {"slow": None}
    done = Outcome(a, store.worker_id, 1, Status.SUCCEEDED, result_json="3")
    jobs, full = store.claim_limited({"slow"}, 4, now + 1, finished=[done])
    assert ids(jobs) == [b]


def test_a_paused_limited_queue_gives_nothing(harness, store, now):
    harness.set_limits("slow", concurrency=3)
    harness.add(now - 1, queue="slow")
    harness.pause("slow")
    assert store.claim_limited(QUEUES, 3, now) == ([], {})


def test_notify_freed_is_accepted(store):
    assert store.notify_freed({"slow"}) is None


def test_a_snooze_gives_the_attempt_back_and_counts_the_snooze(harness, store, now):
    job_id = harness.add(now - 1, max_attempts=1)
    [job] = store.claim(QUEUES, 1, now)
    assert job.snoozes == 0
    snooze = Outcome(job.id, job.worker, job.attempt, Status.PENDING, retry_at=at(now + 30), snoozed=True)
    assert store.finish([snooze], now) == {job_id}
    row = harness.row(job_id)
    assert (row["status"], row["attempts"], row["snoozes"], row["errors"]) == (Status.PENDING, 0, 1, [])
    assert store.claim(QUEUES, 1, now + 29) == []
    [again] = store.claim(QUEUES, 1, now + 30)
    assert (again.attempt, again.snoozes) == (1, 1)
