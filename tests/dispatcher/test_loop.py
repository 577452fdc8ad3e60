"""The dispatcher loop driven tick by tick with a fake clock and an in-memory store."""

import threading
import time

import pytest

from scheduler_app.dispatcher.loop import Dispatcher
from scheduler_app.vocabulary.policy import RELEASED_CLASS, TIMEOUT_CLASS
from scheduler_app.vocabulary.wakeup import WakeUp
from tests.dispatcher.fakes import FakeClock, FakeStore
from tests.dispatcher.test_pool import wait_for


def make(groups=None, **kw):
    clock = FakeClock(1000.0)
    store = FakeStore(clock)
    options = {"horizon": 60.0, "cap": 100, "poll_interval": 1.0, "lease": 30.0, "grace": 5.0}
    options.update(kw)
    dispatcher = Dispatcher(store, groups or {"*": ({"default", "slow"}, 2)}, store.execute, clock=clock, **options)
    return dispatcher, store, clock


def settle(dispatcher, clock, predicate, timeout=5.0):
    """Tick (at a fixed fake time) until predicate holds; worker threads run for real.

    ``timeout`` is a hang guard, never a timing assertion: what a test
    asserts about time it asserts with the fake clock.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        dispatcher.tick(clock.time())
        if predicate():
            return True
        time.sleep(0.002)
    return False


def test_waits_exactly_until_the_heap_top_is_due():
    dispatcher, store, clock = make(
        poll_interval=100, full_sync_interval=100, housekeeping_interval=100, pause_interval=100
    )
    dispatcher.lease = 300
    store.add(1, 1007.5)
    wait = dispatcher.tick(clock.time())
    assert 7.4 < wait <= 7.5
    clock.advance(wait)
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == "succeeded")


def test_far_future_top_does_not_delay_an_earlier_job_added_later():
    dispatcher, store, clock = make()
    store.add(1, 1050.0)
    dispatcher.tick(clock.time())
    store.add(2, 1001.0)
    dispatcher.notify(WakeUp.of(jobs=[[2, 1001.0, 0, "default"]]))
    wait = dispatcher.tick(clock.time())
    assert wait <= 1.0
    clock.advance(1.0)
    assert settle(dispatcher, clock, lambda: store.jobs[2].status == "succeeded")
    assert store.jobs[1].status == "pending"


def test_one_slot_runs_due_jobs_in_priority_order():
    dispatcher, store, clock = make({"*": ({"default"}, 1)})
    priorities = [3, -5, 50, 0, 7, 100, -100, 20, 1, 9]
    for i, p in enumerate(priorities):
        store.add(i, 999.0, priority=p)
    assert settle(dispatcher, clock, lambda: all(j.status == "succeeded" for j in store.jobs.values()))
    order = [job_id for _, _, ids in store.claims for job_id in ids]
    assert [store.jobs[i].priority for i in order] == sorted(priorities, reverse=True)
    assert all(limit == 1 for _, limit, _ in store.claims)


def test_backpressure_never_claims_more_than_free_slots():
    dispatcher, store, clock = make({"*": ({"default"}, 2)}, cap=50)
    # A claimed job stays "running" in the store until the loop records its
    # outcome, so the jobs need not take time for the peak to be measured.
    for i in range(500):
        store.add(i, 999.0)
    peak = 0

    def check():
        nonlocal peak
        running = sum(1 for j in store.jobs.values() if j.status == "running")
        peak = max(peak, running)
        return all(j.status == "succeeded" for j in store.jobs.values())

    assert settle(dispatcher, clock, check, timeout=20)
    assert peak <= 2
    assert all(limit <= 2 for _, limit, _ in store.claims)
    assert len(dispatcher.timeline) <= 50


def test_slots_freed_between_ticks_are_refilled_by_one_claim_that_records_their_outcomes():
    dispatcher, store, clock = make({"*": ({"default"}, 8)})
    first, rest = threading.Event(), threading.Event()
    for i in range(20):
        store.add(i, 999.0, hold=first if i < 5 else rest)
    try:
        dispatcher.tick(clock.time())
        # An idle dispatcher claims for all its free slots at its first tick.
        assert [(limit, ids) for _, limit, ids in store.claims] == [(8, list(range(8)))]
        first.set()
        assert wait_for(lambda: dispatcher.pool._done.qsize() == 5)  # their results wait for the loop
        claims, finished = len(store.claims), len(store.finished)
        dispatcher.tick(clock.time())
        # The five slots that freed: one claim for five, which also records the five outcomes.
        assert [(limit, ids) for _, limit, ids in store.claims[claims:]] == [(5, list(range(8, 13)))]
        assert sorted(o.job_id for o in store.finished[finished:]) == [0, 1, 2, 3, 4]
    finally:
        first.set()
        rest.set()
    assert settle(dispatcher, clock, lambda: all(j.status == "succeeded" for j in store.jobs.values()), timeout=20)
    assert all(limit <= 8 for _, limit, _ in store.claims)


def test_separate_queues_have_separate_slots():
    dispatcher, store, clock = make({"slow": ({"slow"}, 1), "default": ({"default"}, 1)})
    hold = threading.Event()
    store.add(1, 999.0, queue="slow", hold=hold)
    store.add(2, 999.0, queue="slow")
    for i in range(3, 8):
        store.add(i, 999.0)
    try:
        assert settle(dispatcher, clock, lambda: all(store.jobs[i].status == "succeeded" for i in range(3, 8)))
        assert store.jobs[2].status == "pending"  # the slow queue's only slot is still busy
    finally:
        hold.set()
    assert settle(dispatcher, clock, lambda: store.jobs[2].status == "succeeded")


def test_short_claim_drops_stale_entries():
    dispatcher, store, clock = make()
    store.add(1, 999.0)
    dispatcher.tick(clock.time())  # loads the window, claims job 1
    store.add(2, 1001.0)
    dispatcher.notify(WakeUp.of(jobs=[[2, 1001.0, 0, "default"]]))
    dispatcher.tick(clock.time())
    store.jobs[2].status = "cancelled"  # cancelled elsewhere, no notification
    clock.advance(2)
    dispatcher.tick(clock.time())
    assert 2 not in dispatcher.timeline


def test_timeout_is_written_and_the_slot_reused_while_the_job_still_runs():
    dispatcher, store, clock = make({"*": ({"default"}, 1)})
    hold = threading.Event()
    store.add(1, 999.0, timeout=0.05, hold=hold)  # never returns on its own: deaf to cancel
    store.add(2, 999.5)
    try:
        # The loop sleeps until the running job's deadline, not longer.
        assert dispatcher.tick(clock.time()) == pytest.approx(0.05)
        assert store.jobs[1].status == "running"
        assert wait_for(lambda: store.behaviours[1].runs)  # its thread took it
        clock.advance(0.05)  # the pool's deadlines read the fake clock
        assert settle(dispatcher, clock, lambda: store.jobs[2].status == "succeeded")
        # Job 2 ran on job 1's slot while job 1's thread was still inside it.
        assert not hold.is_set() and dispatcher.pool.abandoned_count == 1
    finally:
        hold.set()
    ((outcome,),) = [[o for o in store.finished if o.job_id == 1]]
    assert outcome.status == "failed" and outcome.error["exception_class"] == TIMEOUT_CLASS
    # Its late result, when it comes, is dropped: still the one outcome.
    assert settle(dispatcher, clock, lambda: dispatcher.pool.abandoned_count == 0)
    assert [o.status for o in store.finished if o.job_id == 1] == ["failed"]


def test_database_errors_back_off_and_keep_outcomes():
    dispatcher, store, clock = make()
    store.add(1, 999.0)
    dispatcher.tick(clock.time())
    assert store.jobs[1].status == "running"
    assert wait_for(lambda: store.behaviours[1].runs and dispatcher.pool._done.qsize())
    store.fail_next = 1
    assert dispatcher.tick(clock.time()) > 0  # the finish failed; it backs off
    assert store.jobs[1].status == "running"
    clock.advance(1)
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == "succeeded")


def test_burst_exits_when_nothing_is_due_and_nothing_runs():
    dispatcher, store, clock = make(burst=True)
    for i in range(5):
        store.add(i, 999.0)
    store.add(99, 5000.0)  # future: does not keep burst mode alive
    thread = threading.Thread(target=dispatcher.run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and dispatcher.finished
    assert all(store.jobs[i].status == "succeeded" for i in range(5))
    assert store.jobs[99].status == "pending" and store.unregistered


def test_max_jobs_stops_after_that_many():
    dispatcher, store, clock = make(max_jobs=3)
    for i in range(10):
        store.add(i, 999.0)
    assert settle(dispatcher, clock, lambda: dispatcher.finished)
    assert sum(1 for j in store.jobs.values() if j.status == "succeeded") == 3


def test_stop_lets_running_jobs_finish_within_grace():
    dispatcher, store, clock = make()
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    try:
        dispatcher.tick(clock.time())
        store.add(2, 999.0)
        dispatcher.stop()
        dispatcher.stop()  # idempotent
        dispatcher.tick(clock.time())
        clock.advance(4.9)  # within the 5 s grace: the running job is waited for
        dispatcher.tick(clock.time())
        assert not dispatcher.finished and store.jobs[1].status == "running"
    finally:
        hold.set()
    assert settle(dispatcher, clock, lambda: dispatcher.finished)
    assert store.jobs[1].status == "succeeded" and store.jobs[2].status == "pending"
    assert store.released == []


def test_stop_releases_what_did_not_finish_in_grace():
    dispatcher, store, clock = make(grace=1.0)
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    try:
        dispatcher.tick(clock.time())
        dispatcher.stop()
        assert dispatcher.tick(clock.time()) == pytest.approx(1.0)  # it waits for the grace period, no longer
        clock.advance(0.9)
        dispatcher.tick(clock.time())
        assert not dispatcher.finished and store.released == []
        clock.advance(0.1)
        dispatcher.tick(clock.time())
        assert dispatcher.finished and store.released == [1]
        # Handed back: no claim takes it while a thread of this dispatcher may run it.
        assert store.jobs[1].status == "running" and store.jobs[1].errors[-1]["exception_class"] == RELEASED_CLASS
    finally:
        hold.set()


def test_a_handed_back_job_is_taken_back_only_once_no_thread_of_its_dispatcher_runs_it():
    dispatcher, store, clock = make(grace=0.0)
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    peer = store.peer("peer")
    runner = threading.Thread(target=dispatcher.run)
    runner.start()
    try:
        assert wait_for(lambda: store.behaviours[1].runs)
        dispatcher.stop()
        runner.join(10)
        assert not runner.is_alive() and store.released == [1]
        assert peer.take_back(clock.time()) == (0, 1)  # its thread still runs the attempt
        assert store.jobs[1].status == "running"
    finally:
        hold.set()
    assert wait_for(lambda: peer.take_back(clock.time()) == (1, 0))
    assert (store.jobs[1].status, store.jobs[1].attempts) == ("pending", 0)


def test_the_hooks_before_release_stop_the_unfinished_attempts_before_they_are_released():
    dispatcher, store, clock = make(grace=1.0)
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    seen = []
    dispatcher.before_release.append(lambda jobs: seen.append(([job.id for job in jobs], list(store.released))))
    try:
        dispatcher.tick(clock.time())
        assert wait_for(lambda: store.behaviours[1].runs)
        dispatcher.stop()
        dispatcher.tick(clock.time())
        assert seen == []  # not during the grace period
        clock.advance(1.0)
        dispatcher.tick(clock.time())
        assert seen == [([1], [])]  # given the unfinished attempt, before the release
        assert dispatcher.finished and store.released == [1]
    finally:
        hold.set()


def test_cancel_notification_reaches_the_running_job():
    dispatcher, store, clock = make()
    store.add(1, 999.0, sleep=5)
    dispatcher.tick(clock.time())
    assert wait_for(lambda: store.behaviours[1].runs)
    dispatcher.notify(WakeUp.of(cancel=[1]))
    # Before its 5 s sleep could end by itself: the cancel flag ended it.
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == "cancelled", timeout=4.5)


def test_a_stop_that_lands_mid_tick_gives_a_wait_not_an_error():
    """stop() is called from another thread; it can land after the tick's
    stop check and before the wait is computed (a CI failure: min() of None)."""
    dispatcher, store, clock = make()
    store.add(1, 999.0)
    original = store.claim
    store.claim = lambda *a, **kw: (dispatcher.stop(), original(*a, **kw))[1]
    wait = dispatcher.tick(clock.time())
    assert wait == 0.0 and dispatcher.stopping
    store.claim = original
    assert settle(dispatcher, clock, lambda: dispatcher.finished)


def test_stop_and_notify_wake_a_sleeping_run():
    dispatcher, store, clock = make(
        poll_interval=100, full_sync_interval=100, housekeeping_interval=100, pause_interval=100
    )
    dispatcher.lease = 3000
    loads = []
    original = store.load_window
    store.load_window = lambda *a: loads.append(1) or original(*a)
    thread = threading.Thread(target=dispatcher.run)
    thread.start()
    assert wait_for(lambda: loads)  # the first tick ran: the loop now sleeps for ~100 s
    store.add(1, 999.0)
    dispatcher.notify(WakeUp.of(jobs=[[1, 999.0, 0, "default"]]))
    # Far less than the 100 s it would sleep: the notification woke it.
    assert wait_for(lambda: store.jobs[1].status == "succeeded", 10)
    dispatcher.stop()
    thread.join(2)
    assert not thread.is_alive()


def test_a_woken_loop_yields_the_gil_only_while_jobs_run(monkeypatch):
    """After a wait the loop yields once (time.sleep(0)) so workers that finished together report
    in one batch; with nothing running there is nothing to batch, and the yield (a sleep of the
    kernel's timer slack) would only delay the pickup of the job that woke it."""
    from scheduler_app.dispatcher import loop as loop_module

    dispatcher, store, clock = make(
        poll_interval=100, full_sync_interval=100, housekeeping_interval=100, pause_interval=100
    )
    dispatcher.lease = 3000
    yields, real_sleep = [], time.sleep
    monkeypatch.setattr(
        loop_module.time, "sleep", lambda s: yields.append(dispatcher.pool.busy()) if s == 0 else real_sleep(s)
    )
    thread = threading.Thread(target=dispatcher.run)
    thread.start()
    try:
        for _ in range(5):  # idle: woken five times, never yields
            dispatcher.wake()
            real_sleep(0.01)
        assert yields == []
        release = threading.Event()
        store.add(1, 999.0, hold=release)
        dispatcher.notify(WakeUp.of(jobs=[[1, 999.0, 0, "default"]]))
        assert wait_for(lambda: store.jobs[1].status == "running")
        dispatcher.wake()  # woken while job 1 runs: yields
        assert wait_for(lambda: yields)
        release.set()
        assert wait_for(lambda: store.jobs[1].status == "succeeded")
    finally:
        dispatcher.stop()
        thread.join(5)
    assert not thread.is_alive() and yields and all(busy > 0 for busy in yields)


def test_burst_does_not_wait_for_paused_queues():
    dispatcher, store, clock = make(burst=True)
    store.paused.add("slow")
    store.add(1, 999.0, queue="slow")
    store.add(2, 999.0)
    assert settle(dispatcher, clock, lambda: dispatcher.finished)
    assert store.jobs[1].status == "pending" and store.jobs[2].status == "succeeded"


def test_a_backlog_beyond_the_cap_is_not_reloaded_every_poll():
    dispatcher, store, clock = make({"*": ({"default"}, 1)}, cap=10, poll_interval=0.5)
    for i in range(100):
        store.add(i, 900.0 + i * 0.01, sleep=0.0)
    # The backlog was enqueued a while ago: older than the change poll's
    # overlap (a poll that still saw the bulk insert would reload, rightly).
    clock.advance(dispatcher.window.sync_overlap + 1)
    loads = []
    original = store.load_window
    store.load_window = lambda *a: loads.append(1) or original(*a)
    dispatcher.tick(clock.time())
    assert dispatcher.timeline.truncated and len(loads) == 1
    for _ in range(5):
        clock.advance(0.6)
        dispatcher.tick(clock.time())
    # Every poll interval passed; the window (all due) was not re-read.
    assert len(loads) == 1


def test_a_short_claim_by_id_switches_to_claims_by_query_for_a_while():
    dispatcher, store, clock = make({"*": ({"default"}, 1)})
    holds = [threading.Event() for _ in range(3)]
    for i in range(3):
        store.add(i, 999.0, hold=holds[i])
    try:
        dispatcher.tick(clock.time())
        assert store.jobs[0].status == "running"
        store.jobs[1].status = "running"  # taken by another dispatcher, no notification
        holds[0].set()
        assert settle(dispatcher, clock, lambda: store.jobs[2].status == "running")
        assert store.jobs[0].status == "succeeded"
    finally:
        for hold in holds:
            hold.set()
    by_ids = [ids is not None for ids in store.claim_ids]
    assert by_ids == [True, True, False]


def test_a_poll_that_finds_more_changes_than_the_window_holds_reloads_instead():
    dispatcher, store, clock = make({"*": ({"default"}, 1)}, cap=10, poll_interval=0.5)
    store.add(1, 1005.0)
    loads = []
    original = store.load_window
    store.load_window = lambda *a: loads.append(1) or original(*a)
    dispatcher.tick(clock.time())
    assert len(loads) == 1
    clock.advance(0.6)
    for i in range(3):
        store.add(100 + i, 1010.0 + i)  # no notification: only the poll finds them
    dispatcher.tick(clock.time())
    # A few changes are applied from the poll itself.
    assert len(loads) == 1 and 100 in dispatcher.timeline and store.change_limits[-1] == 10
    clock.advance(0.6)
    for i in range(11):
        store.add(200 + i, 1020.0 + i)
    dispatcher.tick(clock.time())
    # Past the window's cap: one window load (at most cap entries) instead of every change.
    assert len(loads) == 2 and store.change_limits[-1] == 10
    assert 1 in dispatcher.timeline and len(dispatcher.timeline) == 10 and dispatcher.timeline.truncated


def test_a_store_change_check_brings_the_poll_forward_and_bounds_the_wait():
    dispatcher, store, clock = make(
        poll_interval=100,
        full_sync_interval=100,
        housekeeping_interval=100,
        pause_interval=100,
        change_check_interval=0.02,
    )
    dispatcher.lease = 3000
    answers = []
    store.data_changed = lambda: answers.pop(0) if answers else False
    polls = []
    original = store.changes
    store.changes = lambda *a: polls.append(1) or original(*a)
    wait = dispatcher.tick(clock.time())
    assert 0 < wait <= 0.02  # the next check, not the 100 s poll
    clock.advance(0.02)
    dispatcher.tick(clock.time())
    assert polls == []
    answers.append(True)  # another process committed
    clock.advance(0.02)
    dispatcher.tick(clock.time())
    assert polls == [1]


def test_no_store_change_checks_when_they_are_turned_off():
    dispatcher, store, clock = make(
        poll_interval=100,
        full_sync_interval=100,
        housekeeping_interval=100,
        pause_interval=100,
        change_check_interval=0,
    )
    dispatcher.lease = 3000
    checks = []
    store.data_changed = lambda: checks.append(1) or True
    assert dispatcher.tick(clock.time()) > 1  # no 20 ms check bounds the wait
    for _ in range(10):
        clock.advance(0.02)
        dispatcher.tick(clock.time())
    assert checks == []


def test_the_signal_handler_never_takes_the_loop_lock(tmp_path):
    """A signal can land while the main thread holds the loop Event's lock
    (inside Event.wait()); a handler that called Event.set() itself
    deadlocked there (seen: a dispatcher hung on SIGTERM). Reproduced
    deterministically in a subprocess, so the old code hangs into a timeout
    instead of hanging the suite."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "run.py"
    script.write_text(
        "import signal, sys, threading, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from scheduler_app.vocabulary.clock import SystemClock\n"
        "from scheduler_app.dispatcher.loop import Dispatcher\n"
        "from scheduler_app.dispatcher.shutdown import graceful_signals\n"
        "from tests.dispatcher.fakes import FakeStore\n"
        "s = FakeStore(SystemClock())\n"
        "d = Dispatcher(s, {'*': ({'default'}, 1)}, s.execute)\n"
        "with graceful_signals(d.stop):\n"
        "    handler = signal.getsignal(signal.SIGTERM)\n"
        "    with d._event._cond:  # as inside Event.wait()\n"
        "        handler(signal.SIGTERM, None)\n"
        "    for _ in range(200):\n"
        "        if d.stopping and d._event.is_set():\n"
        "            print('stopped', flush=True); break\n"
        "        time.sleep(0.01)\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "stopped" in result.stdout, result.stderr


def test_a_change_time_from_the_future_does_not_move_the_watermark_past_now():
    """A row whose updated_at is years ahead (a clock ahead, a row written around the service)
    must not make later polls skip every change until then."""
    dispatcher, store, clock = make(full_sync_interval=1000, housekeeping_interval=1000)
    dispatcher.tick(clock.time())
    row = store.add(1, clock.time() + 50)
    row.updated = clock.time() + 10**9
    clock.advance(1.0)
    dispatcher.tick(clock.time())
    assert dispatcher.window.watermark <= clock.time()
    # A change made now is still found by the next poll.
    store.add(2, clock.time() + 5)
    clock.advance(1.0)
    dispatcher.tick(clock.time())
    assert 2 in dispatcher.timeline


def test_change_polls_stop_rereading_a_bulk_enqueue_once_past_the_overlap():
    """Jobs enqueued together and left pending (due later) are read by the polls within
    sync_overlap of it, then no more: the watermark follows the polls, not the last change."""
    dispatcher, store, clock = make(full_sync_interval=1000, housekeeping_interval=1000, poll_interval=1.0)
    dispatcher.tick(clock.time())  # the first window load, before the jobs exist
    for i in range(50):
        store.add(i, clock.time() + 50)  # changed now; due in 50 s
    for _ in range(10):  # ten polls, one a second, with no other change
        clock.advance(1.0)
        dispatcher.tick(clock.time())
    assert len(store.change_limits) == 10 and all(i in dispatcher.timeline for i in range(50))
    # Within the 2 s overlap of a poll: the first three polls; not the seven after.
    assert store.changed_rows_read <= 3 * 50
    # A change made now is still found by the next poll.
    store.add(99, clock.time() + 5)
    clock.advance(1.0)
    dispatcher.tick(clock.time())
    assert 99 in dispatcher.timeline
