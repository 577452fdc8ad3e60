"""The loop and limited queues (the gate): no starvation of other queues, no spinning while a queue is full."""

from scheduler_app.dispatcher.gate import Gate
from scheduler_app.vocabulary.wakeup import WakeUp
from tests.dispatcher.test_loop import make, settle


def running(store, queue=None):
    return sorted(j.id for j in store.jobs.values() if j.status == "running" and (queue is None or j.queue == queue))


def test_the_gate_blocks_until_the_window_turns_or_a_job_ends():
    gate = Gate(retry_interval=1.0)
    gate.update({"a", "b", "c"})
    gate.block("a", 105.0, now=100.0)
    gate.block("b", None, now=100.0)
    assert gate.blocked(100.0) == {"a", "b"}
    assert gate.next_moment({"a", "b"}) == 101.0 and gate.next_moment({"a"}) == 105.0
    gate.free({"a", "b"}, only_concurrency=True)
    assert gate.blocked(100.0) == {"a"}
    assert gate.blocked(105.0) == set()
    gate.block("c", None, now=100.0)
    gate.update({"a"})  # c lost its limits: nothing to wait for
    assert gate.blocked(100.5) == set()


def test_a_full_limited_queue_does_not_starve_the_others_in_its_group():
    dispatcher, store, clock = make({"*": ({"default", "slow"}, 4)})
    store.set_limits("default", concurrency=1)
    for i in range(5):
        store.add(i, 999.0, priority=50, sleep=30)
    for i in range(10, 13):
        store.add(i, 999.0, queue="slow", sleep=30)
    assert settle(dispatcher, clock, lambda: len(running(store)) == 4)
    assert running(store, "default") == [0] and running(store, "slow") == [10, 11, 12]
    dispatcher.stop()


def test_a_full_queue_is_not_asked_again_until_a_job_ends_or_the_retry_interval():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=1.0, full_sync_interval=100, pause_interval=100
    )
    store.set_limits("default", concurrency=1)
    for i in range(5):
        store.add(i, 999.0, sleep=30)
    assert settle(dispatcher, clock, lambda: len(running(store)) == 1)
    asked = len(store.limited_claims)
    waits = [dispatcher.tick(clock.time() + k * 0.01) for k in range(50)]
    # Fifty wake-ups (a notification, a finished job elsewhere...) and not one more claim: no spinning.
    assert len(store.limited_claims) == asked
    assert min(waits) > 0
    # The gate's retry interval passes: one more try, still full.
    clock.advance(1.01)
    dispatcher.tick(clock.time())
    assert len(store.limited_claims) == asked + 1
    dispatcher.stop()


def test_another_dispatchers_finish_frees_the_queue_at_once():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=100, full_sync_interval=100, pause_interval=100
    )
    store.set_limits("default", concurrency=1)
    store.add(1, 999.0, sleep=30)
    store.add(2, 999.0)
    assert settle(dispatcher, clock, lambda: running(store) == [1])
    asked = len(store.limited_claims)
    # Elsewhere, the running job ends (here: its row changes), and a "freed" message arrives.
    store.jobs[1].status = "succeeded"
    dispatcher.notify(WakeUp.of(freed=["default"]))
    assert settle(dispatcher, clock, lambda: store.jobs[2].status == "succeeded")
    assert len(store.limited_claims) == asked + 1
    dispatcher.stop()


def test_an_own_finish_frees_the_queue_and_is_told_to_the_others():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=100, full_sync_interval=100, pause_interval=100
    )
    store.set_limits("default", concurrency=1)
    for i in range(3):
        store.add(i, 999.0)
    assert settle(dispatcher, clock, lambda: all(j.status == "succeeded" for j in store.jobs.values()))
    # Each claim found room for one; each finish freed it at once (no retry interval passed).
    assert clock.time() == 1000.0
    assert {"default"} in store.freed


def test_a_rate_limited_queue_sleeps_until_its_window_turns():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=100, full_sync_interval=100, pause_interval=100
    )
    dispatcher.lease = 300
    store.set_limits("default", rate=2, period=10)
    for i in range(5):
        store.add(i, 999.0)
    assert settle(dispatcher, clock, lambda: sum(j.status == "succeeded" for j in store.jobs.values()) == 2)
    wait = dispatcher.tick(clock.time())
    assert 9.9 < wait <= 10.0
    asked = len(store.limited_claims)
    clock.advance(5)
    dispatcher.tick(clock.time())
    assert len(store.limited_claims) == asked  # still full: not asked
    clock.advance(5)
    assert settle(dispatcher, clock, lambda: sum(j.status == "succeeded" for j in store.jobs.values()) == 4)


def test_a_change_of_limits_is_read_at_once():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=100, full_sync_interval=100, pause_interval=100
    )
    store.set_limits("default", concurrency=1)
    store.add(1, 999.0, sleep=30)
    store.add(2, 999.0, sleep=30)
    assert settle(dispatcher, clock, lambda: running(store) == [1])
    store.set_limits("default", concurrency=2)
    dispatcher.notify(WakeUp.of(queues=["default"], queues_changed=True))
    assert settle(dispatcher, clock, lambda: running(store) == [1, 2])
    dispatcher.stop()


def test_others_are_told_of_ended_jobs_at_most_ten_times_a_second():
    gate = Gate()
    assert gate.to_tell({"a", "b"}, 100.0) == {"a", "b"}
    assert gate.to_tell({"a"}, 100.05) == set()
    assert gate.to_tell({"a", "c"}, 100.125) == {"a", "c"}
