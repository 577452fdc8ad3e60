"""The worker pool: slots per group, results, timeouts with replacement threads, cancel."""

import threading
import time

import pytest

from scheduler_app.dispatcher.pool import WorkerPool, WorkerThread
from tests.dispatcher.fake_executor import FakeExecutor, claimed_job
from tests.dispatcher.fakes import FakeClock


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
        assert wait_for(lambda: job.behaviours[1].runs)  # a thread took it
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
        pool.submit_many("a", jobs)
        assert wait_for(lambda: job.behaviours[1].runs and job.behaviours[2].runs)
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
    ((job, outcome, _),) = collect_until(pool, 1, timeout=10)
    assert outcome.status == "cancelled"
    pool.shutdown()


def test_a_batch_of_slow_jobs_gets_a_thread_each():
    pool, _, job = make_pool({"a": 4})
    hold = threading.Event()
    try:
        pool.submit_many("a", [job(i, hold=hold) for i in range(4)])
        # One wake-up for the batch; each thread that takes a job wakes the next:
        # all four start while none has returned (one after another, only the first would).
        assert wait_for(lambda: all(job.behaviours[i].runs for i in range(4))), "the four did not run at once"
        assert pool.collect() == []
    finally:
        hold.set()
    results = collect_until(pool, 4)
    assert sorted(j.id for j, _, _ in results) == [0, 1, 2, 3]
    assert sum(1 for t in threading.enumerate() if t.name.startswith("scheduler-a-")) == 4
    pool.shutdown()


def test_slow_jobs_behind_short_ones_get_a_thread_each_while_threads_sleep():
    """Threads back from a short attempt take the next without waking anyone; the slow ones still run at once."""
    pool, _, job = make_pool({"a": 6})
    pool.submit_many("a", [job(i, sleep=0.01) for i in range(6)])
    collect_until(pool, 6)  # six threads, all asleep again
    assert wait_for(lambda: len(pool._sleeping["a"]) == 6)
    hold = threading.Event()
    try:
        batch = [job(10 + i) for i in range(3)] + [job(20 + i, hold=hold) for i in range(3)]
        pool.submit_many("a", batch)
        assert wait_for(lambda: all(job.behaviours[20 + i].runs for i in range(3))), (
            "the slow three did not run at once"
        )
        collect_until(pool, 3)
    finally:
        hold.set()
    assert sorted(j.id for j, _, _ in collect_until(pool, 3)) == [20, 21, 22]
    pool.shutdown()


def test_a_batch_starts_in_the_order_given():
    pool, _, job = make_pool({"a": 3})
    pool.submit_many("a", [job(i, sleep=0.05) for i in (5, 3, 9)])  # claim order, not id order
    collect_until(pool, 3)
    order = sorted((job.behaviours[i].runs[0], i) for i in (5, 3, 9))
    assert [i for _, i in order] == [5, 3, 9]
    pool.shutdown()


def test_more_than_the_free_slots_is_refused_whole():
    pool, _, job = make_pool({"a": 2})
    with pytest.raises(RuntimeError):
        pool.submit_many("a", [job(1), job(2), job(3)])
    assert pool.free("a") == 2 and pool.running_jobs() == []
    pool.shutdown()


def asleep(pool, group):
    """Return how many of ``group``'s threads sleep on their inbox (they looked at the ready queue last)."""
    with pool._lock:
        return len(pool._sleeping[group])


def _one_busy_thread_and_a_second_slot(pool, job, hold):
    """Run job 1 on the only thread, then open a second slot without a thread for it.

    The loop never does this (each busy slot gets a thread): it lets a test
    hold an attempt on the ready queue, where no thread takes it.
    """
    pool.submit("a", job(1, hold=hold))
    assert wait_for(lambda: job.behaviours[1].runs)
    pool.groups["a"] = 2
    pool._threads["a"].add(object())  # counts as the second slot's thread: none is started


def test_an_attempt_overdue_before_any_thread_took_it_never_starts():
    pool, _, job = make_pool({"a": 1})
    clock = job.clock
    hold = threading.Event()
    try:
        _one_busy_thread_and_a_second_slot(pool, job, hold)
        late = job(2, timeout=0.01)
        pool.submit("a", late)
        clock.advance(0.02)
        assert pool.expire() == [late]
        # Failed and its slot given back, with no thread to abandon.
        assert pool.abandoned_count == 0 and pool.free("a") == 1
        assert [j.id for j in pool.running_jobs()] == [1]
    finally:
        hold.set()
    ((done, _, _),) = collect_until(pool, 1)
    assert done.id == 1
    # The thread is free now: it looks at the ready queue, passes the dropped attempt by, and sleeps.
    assert wait_for(lambda: asleep(pool, "a") == 1)
    assert job.behaviours[2].runs == []
    pool.shutdown()


def test_close_starts_no_ready_attempt_and_keeps_it_in_running_jobs():
    pool, _, job = make_pool({"a": 1})
    hold = threading.Event()
    try:
        _one_busy_thread_and_a_second_slot(pool, job, hold)
        pool.submit("a", job(2))
        pool.close()
        # Both stay claimed: the grace step releases them; the second never starts.
        assert sorted(j.id for j in pool.running_jobs()) == [1, 2]
    finally:
        hold.set()
    collect_until(pool, 1)
    # Back from job 1, the thread finds the pool closed and exits without taking job 2.
    (thread,) = (t for t in pool._threads["a"] if isinstance(t, WorkerThread))
    thread.os_thread.join(10)
    assert not thread.os_thread.is_alive()
    assert job.behaviours[2].runs == []
    pool.shutdown()


def test_an_executor_that_owns_a_jobs_deadline_is_left_to_enforce_it():
    """A process attempt's timeout counts from its task's start, which only the executor sees."""
    seen = {}

    class OwningExecutor(FakeExecutor):
        def owns_deadline(self, job):
            return job.id == 1

        def __call__(self, job, cancel_event, deadline):
            seen[job.id] = deadline
            return super().__call__(job, cancel_event, deadline)

    clock = FakeClock()
    executor = OwningExecutor()
    pool = WorkerPool({"a": 2}, executor, wake=lambda: None, clock=clock)
    hold = threading.Event()
    executor.behave(1, hold=hold)
    executor.behave(2, hold=hold)
    owned, other = claimed_job(1, timeout=0.05), claimed_job(2, timeout=0.05)
    try:
        pool.submit_many("a", [owned, other])
        assert wait_for(lambda: len(seen) == 2)
        assert seen[1] is None and seen[2] == clock.time() + 0.05
        assert pool.next_deadline() == clock.monotonic() + 0.05  # the other job's only
        clock.advance(1.0)
        assert pool.expire() == [other]  # the owned one is the executor's to time out
        assert [j.id for j in pool.running_jobs()] == [1]
    finally:
        hold.set()
    ((done, _, _),) = collect_until(pool, 1)
    assert done.id == 1
    pool.shutdown()
