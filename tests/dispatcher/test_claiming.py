"""The claim step (Claimer) on its own: an in-memory store, a real pool, the window and the gate.

Claimed attempts run on the pool's threads (the fake executor returns at
once) but stay in their slots until a test collects them, so what is free
is what the test says.
"""

import threading

import pytest

from scheduler_app.dispatcher.claiming import Claimer
from scheduler_app.dispatcher.gate import Gate
from scheduler_app.dispatcher.leases import LeaseWatch
from scheduler_app.dispatcher.outcomes import OutcomeBuffer
from scheduler_app.dispatcher.pool import WorkerPool
from scheduler_app.dispatcher.timeline import SCHEDULES, Entry, ScheduleKey, Timeline
from scheduler_app.dispatcher.window import Window
from scheduler_app.vocabulary.jobs import Outcome, Status
from scheduler_app.vocabulary.policy import RetryPolicy
from tests.dispatcher.fakes import FakeClock, FakeStore, TransientError, claimed_job
from tests.dispatcher.test_pool import wait_for

NOW = 1000.0
DUE = NOW - 1


class RecordingStore(FakeStore):
    """FakeStore that also records what each claim was told: in flight, finished."""

    def __init__(self, clock):
        super().__init__(clock)
        self.told = []  # (kind, in_flight ids, finished job ids) per claim

    def claim(self, queues, limit, now, ids=None, finished=(), in_flight=()):
        self.told.append(("claim", set(in_flight), [o.job_id for o in finished]))
        return super().claim(queues, limit, now, ids=ids, finished=finished, in_flight=in_flight)

    def claim_limited(self, queues, limit, now, finished=(), in_flight=()):
        self.told.append(("limited", set(in_flight), [o.job_id for o in finished]))
        return super().claim_limited(queues, limit, now, finished=finished, in_flight=in_flight)


class RecordingRollups:
    def __init__(self):
        self.starts = []

    def started_many(self, jobs, now):
        self.starts.extend((job.id, now) for job in jobs)


class Harness:
    """A Claimer wired as the loop wires it, over one in-memory store."""

    def __init__(self, groups=None, *, cap=100, max_jobs=None, burst=False):
        self.clock = FakeClock(NOW)
        self.store = RecordingStore(self.clock)
        groups = groups or {"*": ({"default", "slow"}, 3)}
        self.groups = {name: (frozenset(qs), slots) for name, (qs, slots) in groups.items()}
        queue_group = {q: name for name, (qs, _) in self.groups.items() for q in qs}
        self.timeline = Timeline(lambda q: SCHEDULES if q == SCHEDULES else queue_group.get(q), cap)
        self.window = Window(
            self.timeline,
            frozenset(queue_group),
            horizon=60.0,
            poll_interval=1.0,
            full_sync_interval=30.0,
            sync_overlap=2.0,
        )
        self.pool = WorkerPool(
            {name: slots for name, (_, slots) in self.groups.items()},
            self.store.execute,
            wake=lambda: None,
            clock=self.clock,
        )
        self.gate = Gate(retry_interval=1.0)
        self.outcomes = OutcomeBuffer(self.gate)
        self.leases = LeaseWatch(30.0, self.pool, RetryPolicy())
        self.rollups = None  # no per-minute tallies kept
        self.claimer = Claimer(self.store, self.groups, self, max_jobs=max_jobs, burst=burst)

    def add(self, job_id, at=DUE, **columns):
        return self.store.add(job_id, at, **columns)

    def load(self):
        """Read the window and the limited queues, as the loop's sync does."""
        self.window.reload(self.store, self.clock.time())
        self.gate.update(self.store.limited_queues())

    def claim(self, paused=frozenset(), at=None):
        self.claimer.claim(self.clock.time() if at is None else at, frozenset(paused))

    def running(self):
        return sorted(j.id for j in self.store.jobs.values() if j.status == Status.RUNNING)

    def free_slots(self):
        """Wait for the claimed attempts to return; collect them (their slots free; their outcomes stay unwritten)."""
        busy = self.pool.busy()
        collected = []
        assert wait_for(lambda: collected.extend(self.pool.collect()) or len(collected) >= busy)
        return collected


@pytest.fixture
def make():
    made = []

    def make(*args, **kw):
        harness = Harness(*args, **kw)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.pool.shutdown()


# -- by ids, while alone ---------------------------------------------------------------------


def test_alone_it_claims_the_windows_best_due_jobs_by_id(make):
    h = make({"*": ({"default", "slow"}, 3)})
    for job_id, priority in [(1, 0), (2, 5), (3, -1), (4, 9), (5, 5)]:
        h.add(job_id, priority=priority, queue="slow" if job_id % 2 else "default")
    h.add(6, NOW + 10)  # not due
    h.load()
    h.claim()
    assert h.store.claim_ids == [[4, 2, 5]]  # claim order: priority, time, id
    assert h.running() == [2, 4, 5] and h.pool.busy("*") == 3
    assert h.claimer.claimed_total == 3 and h.claimer.contended_until == 0.0
    assert not any(i in h.timeline for i in (2, 4, 5)) and all(i in h.timeline for i in (1, 3, 6))


def test_a_full_claim_by_id_needs_no_query_even_with_slots_left(make):
    h = make({"*": ({"default"}, 5)})
    h.add(1)
    h.add(2)
    h.load()
    h.claim()
    assert h.store.claim_ids == [[1, 2]] and h.claimer.contended_until == 0.0


def test_nothing_due_claims_nothing(make):
    h = make()
    h.add(1, NOW + 5)
    h.load()
    h.claim()
    assert h.store.claims == [] and h.store.limited_claims == []


def test_no_free_slot_claims_nothing(make):
    h = make({"*": ({"default"}, 1)})
    h.add(1)
    h.add(2)
    h.load()
    h.claim()
    h.claim()
    assert h.store.claim_ids == [[1]] and 2 in h.timeline


def test_paused_queues_are_left_alone(make):
    h = make({"*": ({"default", "slow"}, 3)})
    h.add(1, priority=9)
    h.add(2, queue="slow")
    h.load()
    h.claim(paused={"default"})
    assert h.running() == [2] and 1 in h.timeline  # kept for when the queue resumes


def test_each_slot_group_claims_its_own_queues_for_its_own_slots(make):
    h = make({"a": ({"default"}, 1), "b": ({"slow"}, 2)})
    for i in range(3):
        h.add(i)
        h.add(10 + i, queue="slow")
    h.load()
    h.claim()
    assert sorted(map(sorted, h.store.claim_ids)) == [[0], [10, 11]]
    assert (h.pool.busy("a"), h.pool.busy("b")) == (1, 2)


# -- by query: contended or truncated ---------------------------------------------------------


def test_a_short_claim_by_id_claims_the_rest_by_query_and_backs_off(make):
    h = make({"*": ({"default"}, 5)})
    for i in (1, 2, 3):
        h.add(i, priority=10 - i)
    h.load()
    h.store.peer("other").claim({"default"}, 1, NOW, ids=[2])  # another dispatcher won job 2
    h.add(4)  # not in the window yet
    h.claim()
    assert h.store.claim_ids == [[1, 2, 3], None]
    assert h.running() == [1, 2, 3, 4] and h.claimer.claimed_total == 3
    assert h.claimer.contended_until == NOW + Claimer.CONTENTION_BACKOFF


def test_while_contended_it_claims_by_query_then_by_id_again(make):
    h = make({"*": ({"default"}, 5)})
    h.add(1)
    h.add(2)
    h.load()
    h.store.jobs[1].status = Status.CANCELLED  # gone, unannounced
    h.claim()
    assert h.store.claim_ids == [[1, 2], None]
    backoff_ends = h.claimer.contended_until
    for job_id, at in ((3, backoff_ends - 0.01), (4, backoff_ends)):
        h.add(job_id, at)
        h.window.apply(Entry(job_id, at, 0, "default"))
        h.clock.advance(at - h.clock.time())
        h.claim()
    assert h.store.claim_ids[2:] == [None, [4]]


def test_a_short_claim_drops_the_due_entries_it_proved_stale(make):
    h = make({"*": ({"default"}, 1)})
    h.add(1)
    h.add(2)
    h.load()
    for row in h.store.jobs.values():
        row.status = Status.CANCELLED
    h.claim()
    assert h.store.claim_ids == [[1], None]
    assert 2 not in h.timeline and h.timeline.due_count("*") == 0


def test_a_truncated_window_claims_by_query_the_databases_best(make):
    h = make({"*": ({"default"}, 3)}, cap=2)
    for i in range(6):
        h.add(i, DUE - 10 + i, priority=i)  # the window keeps the earliest, the best are the latest
    h.load()
    assert h.timeline.truncated
    h.claim()
    assert h.store.claim_ids == [None]
    assert h.running() == [3, 4, 5]


def test_a_claim_by_query_never_takes_a_job_still_running_here(make):
    h = make({"*": ({"default"}, 3)}, cap=1)
    h.add(1, priority=9)
    h.add(2)
    h.load()
    hold = threading.Event()
    h.store.execute.behave(1, hold=hold)
    try:
        h.pool.submit("*", claimed_job(1))  # its attempt still runs here; the row says pending (a rescue)
        h.claim()
        assert h.store.told == [("claim", {1}, [])]
        assert h.running() == [2]
    finally:
        hold.set()


# -- held: a job still in flight here --------------------------------------------------------


def test_a_due_job_still_running_here_is_held_until_its_thread_is_done(make):
    h = make({"*": ({"default"}, 3)})
    h.add(1)
    h.add(2)
    hold = threading.Event()
    h.store.execute.behave(1, hold=hold)
    h.pool.submit("*", claimed_job(1))  # the attempt a rescue made pending again while it runs on
    h.load()
    try:
        h.claim()
        assert h.store.claim_ids == [[2]]
        assert set(h.claimer.held) == {1} and 1 not in h.timeline
        h.claimer.release_held()  # still running: still held
        assert set(h.claimer.held) == {1} and 1 not in h.timeline
        h.claim()
        assert h.store.claim_ids == [[2]]  # never claimed twice at once here
    finally:
        hold.set()
    h.free_slots()
    h.claimer.release_held()
    assert h.claimer.held == {} and 1 in h.timeline
    h.claim()
    assert h.store.claim_ids[-1] == [1]


def test_held_alone_makes_no_claim(make):
    h = make({"*": ({"default"}, 3)})
    h.add(1)
    hold = threading.Event()
    h.store.execute.behave(1, hold=hold)
    try:
        h.pool.submit("*", claimed_job(1))
        h.load()
        h.claim()
        assert h.store.claims == [] and set(h.claimer.held) == {1}
    finally:
        hold.set()


def test_release_held_with_nothing_held_is_nothing(make):
    h = make()
    h.claimer.release_held()
    assert h.claimer.held == {}


# -- limited queues ------------------------------------------------------------------------------


def test_a_group_with_a_due_limited_queue_claims_once_within_the_limits(make):
    h = make({"*": ({"default", "lim"}, 5)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1, queue="lim", priority=9)
    h.add(2, queue="lim", priority=9)
    h.add(3)
    h.add(4)
    h.load()
    h.claim()
    assert h.store.claims == []  # one claim, by query, that obeys the limits
    ((queues, limit, ids, full),) = h.store.limited_claims
    assert (queues, limit, ids, full) == ({"default", "lim"}, 5, [1, 3, 4], {"lim": None})
    assert h.gate.blocked(NOW) == {"lim"}
    # Short of the free slots: the other queues' stale entries go, the full queue's stay.
    assert 2 in h.timeline


def test_a_blocked_limited_queue_leaves_the_others_to_the_claim_by_id(make):
    h = make({"*": ({"default", "lim"}, 5)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1, queue="lim")
    h.add(2, queue="lim")
    h.load()
    h.claim()
    assert h.gate.blocked(NOW) == {"lim"}
    h.add(3, NOW + 0.5)
    h.window.apply(Entry(3, NOW + 0.5, 0, "default"))
    h.claim(at=NOW + 0.5)
    assert len(h.store.limited_claims) == 1  # not asked again while full
    assert h.store.claims == [({"default"}, 1, [3])] and h.store.claim_ids == [[3]]
    assert 2 in h.timeline


def test_a_full_rate_blocks_its_queue_until_the_window_has_room(make):
    h = make({"*": ({"lim"}, 5)})
    h.store.set_limits("lim", rate=2, period=10.0)
    for i in range(4):
        h.add(i, queue="lim")
    h.load()
    h.claim()
    assert h.running() == [0, 1]
    assert h.gate.next_moment({"lim"}) == NOW + 10.0
    h.claim(at=NOW + 5)
    assert len(h.store.limited_claims) == 1


def test_a_truncated_window_claims_limited_queues_it_does_not_hold(make):
    h = make({"*": ({"default", "lim"}, 5)}, cap=1)
    h.store.set_limits("lim", concurrency=5)
    h.add(1, DUE - 5)
    h.add(2, queue="lim")
    h.load()
    assert h.timeline.truncated and 2 not in h.timeline
    h.claim()
    assert len(h.store.limited_claims) == 1 and h.running() == [1, 2]


def test_a_limited_claim_leaves_out_the_blocked_queues(make):
    h = make({"*": ({"default", "lim", "lim2"}, 5)})
    h.store.set_limits("lim", concurrency=1)
    h.store.set_limits("lim2", concurrency=5)
    h.add(1, queue="lim")
    h.add(2, queue="lim")
    h.load()
    h.claim()
    assert h.gate.blocked(NOW) == {"lim"}
    h.add(3, queue="lim2")
    h.window.apply(Entry(3, DUE, 0, "lim2"))
    h.claim()
    assert [queues for queues, _, _, _ in h.store.limited_claims] == [{"default", "lim", "lim2"}, {"default", "lim2"}]
    assert h.running() == [1, 3]


def test_a_short_claim_keeps_the_due_entries_of_limited_queues(make):
    h = make({"*": ({"default", "lim"}, 5)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1, queue="lim")
    h.add(2, queue="lim")
    h.load()
    h.claim()
    for job_id in (3, 4):
        h.add(job_id, status=Status.CANCELLED)  # cancelled before the dispatcher heard of it
        h.window.apply(Entry(job_id, DUE, 0, "default"))
    h.claim()  # lim is full: by id, then by query; both short
    assert h.store.claim_ids == [[3, 4], None]
    assert 2 in h.timeline  # lim's turn comes when it has room


def test_a_limited_claim_never_takes_a_job_still_running_here(make):
    h = make({"*": ({"lim"}, 3)})
    h.store.set_limits("lim", concurrency=5)
    h.add(1, queue="lim")
    h.add(2, queue="lim")
    hold = threading.Event()
    h.store.execute.behave(1, hold=hold)
    try:
        h.pool.submit("*", claimed_job(1))
        h.load()
        h.timeline.remove(1)  # not held: the limited claim goes by query
        h.claim()
        assert h.store.told == [("limited", {1}, [])] and h.running() == [2]
    finally:
        hold.set()


def test_limited_queues_without_due_jobs_do_not_turn_the_claim_into_a_limited_one(make):
    h = make({"*": ({"default", "lim"}, 5)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1)
    h.add(2, NOW + 30, queue="lim")
    h.load()
    h.claim()
    assert h.store.limited_claims == []
    assert h.store.claims == [({"default"}, 1, [1])]


def test_a_paused_limited_queue_is_not_claimed_from(make):
    h = make({"*": ({"default", "lim"}, 5)})
    h.store.set_limits("lim", concurrency=5)
    h.add(1, queue="lim")
    h.add(2)
    h.load()
    h.claim(paused={"lim"})
    assert h.store.limited_claims == [] and h.running() == [2]


# -- outcomes ride on the claim ------------------------------------------------------------------


def test_a_claim_writes_the_outcomes_collected_so_far(make):
    h = make({"*": ({"default", "lim"}, 2)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1, queue="lim")
    h.load()
    h.claim()
    ((job, _, _),) = h.free_slots()
    h.outcomes.add(job, Outcome(1, job.worker, job.attempt, Status.SUCCEEDED, result_json="7"), NOW)
    h.add(2)
    h.window.apply(Entry(2, DUE, 0, "default"))
    h.claim()
    assert h.store.told[-1] == ("claim", set(), [1])
    assert h.store.jobs[1].status == Status.SUCCEEDED and h.outcomes.pending == []
    assert h.store.freed == [{"lim"}]  # told once written


def test_a_limited_claim_writes_the_outcomes_too(make):
    h = make({"*": ({"lim"}, 2)})
    h.store.set_limits("lim", concurrency=1)
    h.add(1, queue="lim")
    h.add(2, queue="lim")
    h.load()
    h.claim()
    ((job, _, _),) = h.free_slots()
    h.outcomes.add(job, Outcome(1, job.worker, job.attempt, Status.SUCCEEDED), NOW)
    assert h.gate.blocked(NOW) == set()  # the ended attempt freed the queue here
    h.claim()
    assert h.store.told[-1] == ("limited", set(), [1])
    assert h.running() == [2] and h.outcomes.pending == []


def test_a_claim_that_fails_keeps_the_outcomes_and_gives_the_entries_back(make):
    h = make({"*": ({"default"}, 2)})
    h.add(1)
    h.load()
    h.claim()
    ((job, _, _),) = h.free_slots()
    outcome = Outcome(1, job.worker, job.attempt, Status.SUCCEEDED)
    h.outcomes.add(job, outcome, NOW)
    h.add(2)
    h.window.apply(Entry(2, DUE, 0, "default"))
    h.store.fail_next = 1
    with pytest.raises(TransientError):
        h.claim()
    assert h.outcomes.pending == [outcome] and 2 in h.timeline
    h.claim()
    assert h.store.claim_ids[-1] == [2] and h.outcomes.pending == []


# -- max_jobs, burst ------------------------------------------------------------------------------


def test_max_jobs_caps_what_is_claimed_across_claims(make):
    h = make({"*": ({"default"}, 2)}, max_jobs=3)
    for i in range(6):
        h.add(i)
    h.load()
    h.claim()
    assert h.store.claim_ids == [[0, 1]] and not h.claimer.done()
    h.free_slots()
    h.claim()
    assert h.store.claim_ids[-1] == [2] and h.claimer.done()
    h.free_slots()
    h.store.add_schedule(5, DUE, 60.0)
    h.window.reload(h.store, NOW)
    h.claim()
    # Done: nothing more, not even the schedules (the loop stops).
    assert len(h.store.claims) == 2 and h.claimer.claimed_total == 3
    assert h.store.materialized == []


def test_without_max_jobs_it_is_never_done(make):
    h = make({"*": ({"default"}, 2)})
    h.add(1)
    h.load()
    h.claim()
    assert not h.claimer.done()


def test_burst_claims_by_query_when_the_window_is_empty_and_nothing_runs(make):
    h = make({"*": ({"default"}, 2)}, burst=True)
    h.add(1)
    h.add(2)
    h.store.add_schedule(5, DUE, 60.0)
    h.claim()  # no window loaded: it holds nothing
    assert h.store.claim_ids == [None] and h.running() == [1, 2]
    assert h.store.materialized == [(5, DUE)]


def test_burst_waits_while_something_runs(make):
    h = make({"*": ({"default"}, 2)}, burst=True)
    h.add(1)
    h.load()
    h.claim()
    h.add(2)  # the window does not know it
    h.claim()
    assert h.store.claim_ids == [[1]]


def test_without_burst_an_empty_window_claims_nothing(make):
    h = make({"*": ({"default"}, 2)})
    h.add(1)
    h.claim()
    assert h.store.claims == []


# -- schedules, rollups, leases ----------------------------------------------------------------


def test_due_schedules_are_materialised_and_their_next_runs_kept(make):
    h = make({"*": ({"default"}, 1)})
    h.store.add_schedule(5, DUE, 60.0)
    h.store.add_schedule(6, NOW + 30, 60.0)
    h.add(1)
    h.load()
    h.claim()
    assert h.store.materialized == [(5, DUE)]
    assert ScheduleKey(5) in h.timeline and ScheduleKey(6) in h.timeline
    assert h.timeline.next_at() == NOW + 30  # schedule 5 next runs at DUE + 60
    h.clock.advance(60)
    h.claim()  # job 1 still holds the only slot: schedules are made all the same
    assert h.store.materialized == [(5, DUE), (5, DUE + 60), (6, NOW + 30)]


def test_a_schedule_another_dispatcher_made_stays_at_its_next_run(make):
    h = make({"*": ({"default"}, 1)})
    h.store.add_schedule(5, DUE, 60.0)
    h.load()
    h.store.schedules[5].at = DUE + 60  # made elsewhere since the load
    h.claim()
    assert h.store.materialized == []
    assert ScheduleKey(5) in h.timeline and h.timeline.next_at() == DUE + 60


def test_claims_are_counted_in_the_rollups_and_start_the_lease(make):
    h = make({"*": ({"default"}, 3)})
    h.claimer.rollups = rollups = RecordingRollups()
    assert h.leases.until is None
    h.load()
    h.add(9, status=Status.CANCELLED)
    h.window.apply(Entry(9, DUE, 0, "default"))
    h.claim()  # nothing claimed: the lease has not started
    assert h.store.claim_ids == [[9], None] and h.leases.until is None
    h.add(1)
    h.add(2)
    h.window.apply(Entry(1, DUE, 0, "default"))
    h.window.apply(Entry(2, DUE, 0, "default"))
    h.claim(at=NOW + 1)
    assert rollups.starts == [(1, NOW + 1), (2, NOW + 1)]
    assert h.leases.until == NOW + 1 + 30.0
