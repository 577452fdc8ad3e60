"""The pool with an asyncio lane (``dispatcher/asyncio_lane.py``), without Django: slots without threads,
a timeout and a cancel that cancel the coroutine, a slot kept while a cancelled coroutine runs on, the hand-back's abort."""

import asyncio
import threading
import time

from scheduler_app.dispatcher.asyncio_lane import AsyncLane
from scheduler_app.dispatcher.pool import WorkerPool
from tests.dispatcher.fake_executor import FakeExecutor, claimed_job
from tests.dispatcher.fakes import FakeClock
from tests.dispatcher.test_pool import wait_for


class FakeRun:
    """The lane's ``run``: awaits ``sleep`` seconds; a cancel ends it "cancelled", unless it ``swallows`` it."""

    def __init__(self):
        self.sleep = {}  # job id -> seconds
        self.swallow = {}  # job id -> threading.Event: after a cancel, run on until it is set
        self.threads = set()
        self.running = self.most = 0
        self.cancelled = set()
        self.gather = 0  # each waits (30 s at most) until this many ran at once

    async def __call__(self, job, cancel_event, deadline):
        if cancel_event.is_set():  # as the executor's ``prepare``: cancelled before it started
            self.cancelled.add(job.id)
            return ("cancelled before it started", job.id)
        self.threads.add(threading.get_ident())
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            end = time.monotonic() + 30
            while self.most < self.gather and time.monotonic() < end:
                await asyncio.sleep(0.001)
            await asyncio.sleep(self.sleep.get(job.id, 0))
        except asyncio.CancelledError:
            self.cancelled.add(job.id)
            release = self.swallow.get(job.id)
            while release is not None and not release.is_set():
                await asyncio.sleep(0.005)
            return ("cancelled", job.id, cancel_event.is_set())
        finally:
            self.running -= 1
        return ("ok", job.id)


def make(groups=None, refuse=None):
    run = FakeRun()
    lane = AsyncLane(run, lambda job: job.id < 1000)  # ids from 1000 run on threads
    clock = FakeClock()
    woke = threading.Event()
    pool = WorkerPool(groups or {"a": 200}, FakeExecutor(), wake=woke.set, clock=clock, lane=lane, refuse=refuse)
    return pool, run, lane, clock


def collect_until(pool, count, timeout=10.0):
    results = []
    assert wait_for(lambda: results.extend(pool.collect()) or len(results) >= count, timeout)
    return results


def test_a_hundred_attempts_overlap_on_the_lanes_one_thread_and_take_slots_but_no_threads():
    pool, run, lane, _ = make()
    run.gather = 100  # all at once, or none ends before the hang guard
    pool.submit_many("a", [claimed_job(i) for i in range(100)])
    assert pool.free("a") == 100
    results = collect_until(pool, 100)
    assert sorted(outcome for _, outcome, _ in results) == sorted(("ok", i) for i in range(100))
    assert len(run.threads) == 1 and run.most == 100
    assert pool.live_threads() == [lane.live_thread()]  # no worker thread was started
    assert pool.free("a") == 200
    lane.close()
    assert lane.live_thread() is None and pool.live_threads() == []


def test_a_sync_attempt_in_the_same_group_runs_on_a_worker_thread():
    pool, run, lane, _ = make()
    pool.submit_many("a", [claimed_job(1), claimed_job(1000)])
    results = collect_until(pool, 2)
    assert {job.id for job, _, _ in results} == {1, 1000}
    assert ("ok", 1) in [outcome for _, outcome, _ in results]
    pool.shutdown()
    lane.close()


def test_a_timeout_cancels_the_coroutine_its_late_result_is_dropped_and_its_slot_freed_when_it_returns():
    pool, run, lane, clock = make({"a": 1})
    run.sleep[1] = 60
    release = run.swallow[1] = threading.Event()
    pool.submit("a", claimed_job(1, timeout=5))
    assert wait_for(lambda: run.running == 1)
    clock.advance(6)
    assert [job.id for job in pool.expire()] == [1]
    assert wait_for(lambda: 1 in run.cancelled)
    # The coroutine swallowed the cancel and runs on: it keeps its slot, and the job counts as in flight.
    assert pool.free("a") == 0 and pool.runs_on(1) and 1 in pool.in_flight()
    assert pool.running_jobs() == [] and pool.collect() == []
    release.set()
    assert wait_for(lambda: pool.collect() == [] and pool.free("a") == 1)
    assert pool.returned() == [1] and not pool.runs_on(1)
    lane.close()


def test_a_cancel_sets_the_flag_and_cancels_the_coroutine_once():
    pool, run, lane, _ = make()
    run.sleep[1] = 60
    pool.submit("a", claimed_job(1))
    assert wait_for(lambda: run.running == 1)
    assert pool.request_cancel([1, 2]) == 1
    pool.request_cancel([1])  # again (a heartbeat repeats it): the attempt ends once
    [(job, outcome, error)] = collect_until(pool, 1)
    assert outcome == ("cancelled", 1, True) and error is None
    lane.close()


def test_a_cancel_that_comes_before_the_coroutine_started_stops_it_by_its_flag():
    pool, run, lane, _ = make()
    run.sleep[1] = 60
    block = threading.Event()
    lane._call(block.wait)  # the lane's loop is busy: the attempt's first step waits behind the cancel
    pool.submit("a", claimed_job(1))
    pool.request_cancel([1])
    block.set()
    [(_, outcome, error)] = collect_until(pool, 1)
    assert outcome == ("cancelled before it started", 1) and error is None
    lane.close()


def test_an_attempt_whose_lease_ran_out_is_refused_before_it_starts():
    refused = []

    def refuse(job, now):
        refused.append(job.id)
        return ("lost", job.id)

    pool, run, lane, _ = make(refuse=refuse)
    pool.submit("a", claimed_job(1))
    [(_, outcome, _)] = collect_until(pool, 1)
    assert outcome == ("lost", 1) and refused == [1] and run.threads == set()
    lane.close()


def test_the_hand_back_cancels_and_waits_and_nothing_handed_over_after_the_close_starts():
    pool, run, lane, _ = make()
    run.sleep.update({1: 60, 2: 60})
    pool.submit_many("a", [claimed_job(1), claimed_job(2)])
    assert wait_for(lambda: run.running == 2)
    pool.close()
    assert lane.abort([claimed_job(1)], wait=10) == 0  # ended within the wait
    assert run.cancelled == {1} and run.running == 1
    pool.submit("a", claimed_job(3))  # after the close: never starts
    assert lane.abort([claimed_job(2), claimed_job(3)], wait=10) == 0
    assert run.cancelled == {1, 2} and run.running == 0
    assert {job.id for job in pool.running_jobs()} >= {3}
    lane.close()


def test_the_abort_says_how_many_did_not_end():
    pool, run, lane, _ = make()
    run.sleep[1] = 60
    release = run.swallow[1] = threading.Event()
    pool.submit("a", claimed_job(1))
    assert wait_for(lambda: run.running == 1)
    assert lane.abort([claimed_job(1)], wait=0.05) == 1
    # Still running: the close leaves the loop running, so the hand-back waits for the process to end.
    lane.close()
    assert lane.live_thread() is not None and pool.live_threads() == [lane.live_thread()]
    release.set()
    assert wait_for(lambda: run.running == 0)
    lane.close()
    assert lane.live_thread() is None
