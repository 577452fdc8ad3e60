"""The loop and its leases under a failing database: what it renews, what it stops, how it stops (invariants 10, 13, 14)."""

import threading

from scheduler_app.dispatcher.leases import LEASE_MARGIN
from scheduler_app.vocabulary.jobs import Status
from scheduler_app.vocabulary.policy import LEASE_EXPIRED_CLASS, TIMEOUT_CLASS
from scheduler_app.vocabulary.wakeup import WakeUp
from tests.dispatcher.fakes import FakeClock, FakeStore
from tests.dispatcher.test_loop import make, settle
from tests.dispatcher.test_pool import wait_for


def test_only_the_attempts_still_running_have_their_leases_renewed():
    dispatcher, store, clock = make()
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    store.add(2, 999.0, max_attempts=2)
    try:
        dispatcher.tick(clock.time())
        assert store.jobs[1].status == store.jobs[2].status == Status.RUNNING
        first_lease = store.jobs[2].lease_until
        assert wait_for(lambda: dispatcher.pool._done.qsize() == 1)  # job 2 ended; its outcome is not written
        store.fail_finish = 10**6
        clock.advance(dispatcher.lease / 3)
        dispatcher.tick(clock.time())  # a heartbeat; the finish of job 2 fails
        assert store.jobs[1].lease_until == clock.time() + dispatcher.lease  # still runs: renewed
        assert store.jobs[2].lease_until == first_lease  # cannot be finished: left to expire
        assert dispatcher.outcomes.pending and store.jobs[2].status == Status.RUNNING
        peer = store.peer("rescuer")
        assert peer.rescue(first_lease + 1) == 1  # another dispatcher takes job 2 back
        assert store.jobs[2].status == Status.PENDING and store.jobs[1].status == Status.RUNNING
    finally:
        hold.set()


def test_attempts_are_stopped_before_leases_it_could_not_renew_expire():
    dispatcher, store, clock = make()
    stopped = []
    dispatcher.leases.on_lost.append(stopped.extend)
    store.add(1, 999.0, sleep=60.0, max_attempts=3)  # cooperative: returns once its cancel flag is set
    dispatcher.tick(clock.time())
    assert wait_for(lambda: store.behaviours[1].runs)
    store.fail_next = 10**6  # the database is gone: no renewal from now on
    claimed_at = clock.time()
    clock.advance(dispatcher.lease * (1 - LEASE_MARGIN) - 0.5)
    dispatcher.tick(clock.time())
    assert not stopped  # its lease still has time
    wait = dispatcher.tick(clock.time())
    assert wait <= 0.5 + 1e-6  # it wakes up in time to stop it
    clock.advance(0.5)
    dispatcher.tick(clock.time())
    assert [job.id for job in stopped] == [1]
    assert clock.time() < claimed_at + dispatcher.lease  # before anyone may rescue it
    assert wait_for(lambda: dispatcher.pool._done.qsize() == 1)  # the task saw its cancel flag
    clock.advance(10.0)  # past the loop's back-off: it collects the outcome, and cannot write it
    dispatcher.tick(clock.time())
    ((outcome,),) = [dispatcher.outcomes.pending]
    # Lost, not cancelled: nobody asked for a cancel; it runs again after its backoff.
    assert outcome.status == Status.PENDING and outcome.error["exception_class"] == LEASE_EXPIRED_CLASS
    store.fail_next = 0
    clock.advance(10)
    dispatcher.tick(clock.time())
    assert store.jobs[1].status == Status.PENDING and store.jobs[1].errors[-1]["exception_class"] == LEASE_EXPIRED_CLASS


def test_a_stop_ends_within_its_grace_period_when_the_database_is_gone():
    dispatcher, store, clock = make(grace=5.0)
    hold = threading.Event()
    stopped = []
    dispatcher.before_release.append(stopped.extend)
    store.add(1, 999.0, hold=hold)  # deaf to its cancel flag
    try:
        dispatcher.tick(clock.time())
        store.fail_next = 10**6
        dispatcher.stop()
        start = clock.time()
        for _ in range(100):
            wait = dispatcher.tick(clock.time())
            if dispatcher.finished:
                break
            assert clock.time() + wait <= start + 5.0 + 1e-6  # never sleeps past the grace period
            clock.advance(max(wait, 0.01))
        assert dispatcher.finished and clock.time() <= start + 5.0 + 1e-6
        assert [job.id for job in stopped] == [1]  # worker processes would be stopped hard
        assert store.jobs[1].status == Status.RUNNING  # not released: its lease expires
    finally:
        hold.set()


def test_it_never_claims_a_job_it_still_runs():
    dispatcher, store, clock = make({"*": ({"default"}, 2)})
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    try:
        dispatcher.tick(clock.time())
        assert store.jobs[1].status == Status.RUNNING and wait_for(lambda: store.behaviours[1].runs)
        # An outage longer than the lease: a rescue made it pending while its thread runs on here.
        row = store.jobs[1]
        row.status, row.lease_until, row.updated = Status.PENDING, None, clock.time()
        store.add(2, 999.0)
        dispatcher.notify(WakeUp.of(jobs=[[1, 999.0, 0, "default"], [2, 999.0, 0, "default"]]))
        assert settle(dispatcher, clock, lambda: store.jobs[2].status == Status.SUCCEEDED)
        dispatcher.claims.contended_until = clock.time() + 60  # claims by query too
        for _ in range(3):
            dispatcher.tick(clock.time())
        assert store.jobs[1].status == Status.PENDING and len(store.behaviours[1].runs) == 1
        assert all(1 not in ids for _, _, ids in store.claims[1:])
    finally:
        hold.set()
    # Once its thread returned, it runs here again (its late outcome lost the compare-and-set).
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == Status.SUCCEEDED)


def test_a_timed_out_job_whose_thread_runs_on_is_not_claimed_again_here():
    dispatcher, store, clock = make({"*": ({"default"}, 2)})
    hold = threading.Event()
    store.add(1, 999.0, timeout=0.05, hold=hold, max_attempts=3)
    try:
        dispatcher.tick(clock.time())
        assert wait_for(lambda: store.behaviours[1].runs)
        clock.advance(0.05)
        dispatcher.tick(clock.time())  # timed out; the thread runs on: the retry waits for it
        assert dispatcher.pool.abandoned_count == 1
        clock.advance(60)
        for _ in range(3):
            dispatcher.tick(clock.time())
        assert store.jobs[1].status == Status.RUNNING and len(store.behaviours[1].runs) == 1
        # Another dispatcher cannot take it either: it is running, and its lease is renewed here.
        peer = store.peer("peer")
        assert peer.claim({"default"}, 5, clock.time()) == [] and peer.rescue(clock.time()) == 0
        assert store.jobs[1].lease_until > clock.time()
    finally:
        hold.set()
    # Its thread returned: the retry is written now, and a poll later it runs again.
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == Status.PENDING)
    clock.advance(dispatcher.poll_interval)
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == Status.SUCCEEDED)
    errors = store.jobs[1].errors
    assert [e["exception_class"] for e in errors] == [TIMEOUT_CLASS]


def test_the_policy_reads_the_loops_clock():
    dispatcher, store, clock = make()
    hold = threading.Event()
    store.add(1, 999.0, timeout=0.05, hold=hold, max_attempts=1)
    try:
        dispatcher.tick(clock.time())
        clock.advance(0.05)
        dispatcher.tick(clock.time())
    finally:
        hold.set()
    (error,) = store.jobs[1].errors
    assert error["time"].startswith("1970-01-01T00:16:40")  # FakeClock(1000.0), not today


def test_stores_renew_what_they_are_given():
    store = FakeStore(FakeClock(0.0))
    store.add(1, 0.0)
    store.add(2, 0.0)
    store._take([store.jobs[1], store.jobs[2]], 10.0)
    store.renew(20.0, [1])
    assert (store.jobs[1].lease_until, store.jobs[2].lease_until) == (50.0, 40.0)


def test_a_worker_starts_no_attempt_whose_lease_ran_out_before_it_could():
    """A dispatcher paused between a claim and a worker's start (invariant 14): the attempt is refused, as lost."""
    dispatcher, store, clock = make()
    store.add(1, 999.0, max_attempts=3)
    (job,) = store.claim({"default"}, 1, clock.time())
    assert dispatcher.leases.refuse(job, clock.time() + dispatcher.lease * (1 - LEASE_MARGIN) - 0.01) is None
    outcome = dispatcher.leases.refuse(job, clock.time() + dispatcher.lease * (1 - LEASE_MARGIN))
    assert outcome.status == Status.PENDING and outcome.error["exception_class"] == LEASE_EXPIRED_CLASS
    assert "Not started" in outcome.error["message"]


def test_the_pool_asks_before_it_starts_an_attempt_and_records_a_refusal_instead():
    dispatcher, store, clock = make()
    store.add(1, 999.0, max_attempts=3)
    asked = []

    def refuse(job, now):
        asked.append((job.id, now))
        return dispatcher.leases.refuse(job, now + dispatcher.lease)  # as if paused past the lease

    dispatcher.pool._refuse = refuse
    dispatcher.tick(clock.time())
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == Status.PENDING)
    assert asked == [(1, clock.time())] and store.behaviours[1].runs == []  # never started
    assert [e["exception_class"] for e in store.jobs[1].errors] == [LEASE_EXPIRED_CLASS]


def test_the_guardian_is_told_when_the_earliest_lease_in_flight_moves_and_when_nothing_runs():
    dispatcher, store, clock = make()
    told = []
    dispatcher.leases.on_until.append(lambda until, lease: told.append(until))
    hold = threading.Event()
    store.add(1, 999.0, hold=hold)
    try:
        dispatcher.tick(clock.time())
        assert told == [clock.time() + dispatcher.lease]
        clock.advance(dispatcher.lease / 3)
        dispatcher.tick(clock.time())  # a heartbeat renews it
        assert told[-1] == clock.time() + dispatcher.lease
    finally:
        hold.set()
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == Status.SUCCEEDED)
    assert told[-1] is None  # idle: disarmed
