"""The worker pool: slots per group, results, timeouts with replacement threads, cancel."""

import threading
import time

import pytest

from scheduler_app.dispatcher.clock import FakeClock
from scheduler_app.dispatcher.pool import WorkerPool

from .fakes import FakeExecutor, claimed_job


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def collect_until(pool, count, timeout=10.0):
    results = []
    assert wait_for(lambda: results.extend(pool.collect()) or len(results) >= count, timeout)
    return results


def make_pool(groups=None, max_abandoned=2, clock=None):
    """Return ``(pool, woke, job)``: ``job(id, sleep=, raises=, hold=, timeout=)`` makes a
    ClaimedJob and tells the pool's fake executor how it behaves. Deadlines follow
    ``clock`` (a FakeClock by default)."""
    woke = threading.Event()
    executor = FakeExecutor()
    clock = clock or FakeClock()
    pool = WorkerPool(groups or {"a": 2, "b": 1}, executor, wake=woke.set, clock=clock, max_abandoned=max_abandoned)

    def job(job_id, *, sleep=0.0, raises=False, hold=None, timeout=None):
        executor.behave(job_id, sleep=sleep, raises=raises, hold=hold)
        return claimed_job(job_id, timeout=timeout)

    job.behaviours = executor.behaviours
    job.clock = clock
    return pool, woke, job


def test_slots_are_per_group_and_free_again_after_collect():
    pool, woke, job = make_pool()
    pool.submit("a", job(1, sleep=0.05))
    pool.submit("a", job(2, sleep=0.05))
    assert pool.free("a") == 0 and pool.free("b") == 1
    with pytest.raises(RuntimeError):
        pool.submit("a", job(3))
    results = collect_until(pool, 2)
    assert woke.is_set()
    assert sorted(job.id for job, outcome, error in results) == [1, 2]
    assert pool.free("a") == 2
    pool.shutdown()


def test_threads_are_reused():
    pool, _, job = make_pool({"a": 1})
    for i in range(5):
        pool.submit("a", job(i))
        collect_until(pool, 1)
    assert sum(1 for t in threading.enumerate() if t.name.startswith("scheduler-a-")) == 1
    pool.shutdown()


def test_executor_exception_is_reported_not_lost():
    pool, _, job = make_pool()
    pool.submit("a", job(1, raises=True))
    ((job, outcome, error),) = collect_until(pool, 1)
    assert outcome is None and isinstance(error, RuntimeError)
    assert pool.free("a") == 2
    pool.shutdown()


def test_timeout_frees_the_slot_at_once_and_drops_the_late_result():
    pool, _, job = make_pool({"a": 1})
    clock = job.clock
    hold = threading.Event()
    slow = job(1, timeout=0.05, hold=hold)  # runs until the test lets it return
    try:
        pool.submit("a", slow)
        assert pool.next_deadline() == clock.monotonic() + 0.05
        clock.advance(0.04)
        assert pool.expire() == []
        clock.advance(0.01)
        assert pool.expire() == [slow]
        assert pool.free("a") == 1 and pool.abandoned_count == 1
        fast = job(2)
        pool.submit("a", fast)  # a replacement thread, while the slow one still runs
        results = collect_until(pool, 1)
        assert [done.id for done, _, _ in results] == [2]
        assert not hold.is_set()  # the slot came back without the slow thread returning
    finally:
        hold.set()
    # The late result of job 1 arrives now and is dropped.
    assert wait_for(lambda: not pool.collect() and pool.abandoned_count == 0, 10)
    pool.shutdown()


def test_abandoned_threads_are_bounded():
    pool, _, job = make_pool({"a": 2}, max_abandoned=1)
    clock = job.clock
    hold = threading.Event()
    jobs = [job(i, timeout=0.02, hold=hold) for i in (1, 2)]
    try:
        for claimed in jobs:
            pool.submit("a", claimed)
        clock.advance(0.02)
        assert sorted(j.id for j in pool.expire()) == [1, 2]
        # One thread abandoned (slot given back), the other keeps its slot until it returns.
        assert pool.abandoned_count == 1 and pool.free("a") == 1
        assert pool.next_deadline() is None  # a timed-out job sets no deadline any more
        assert pool.expire() == []  # ... nor expires twice
    finally:
        hold.set()
    assert wait_for(lambda: (pool.collect() or True) and pool.free("a") == 2, 10)
    pool.shutdown()


def test_cancel_request_reaches_the_running_job():
    pool, _, job = make_pool()
    pool.submit("a", job(1, sleep=5))
    assert wait_for(lambda: job.behaviours[1].runs)
    assert pool.request_cancel([1, 99]) == 1
    ((job, outcome, _),) = collect_until(pool, 1, timeout=2)
    assert outcome.status == "cancelled"
    pool.shutdown()
