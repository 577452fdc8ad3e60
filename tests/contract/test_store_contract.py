"""One contract, two stores: every case runs against the in-memory fake and DjangoStore.

The cases call only ``dispatcher.protocol.Store`` methods (the harness in
conftest.py arranges data); a fake that drifts from the database fails
here, not in a loop test that trusts it.

Times are what the cases pass as ``now``: leases expire because a later
``now`` is given, in the SQL as in the fake, so lease expiry is pinned on
both. What the fake does not model, and where it is tested instead:
announcements of changes (NOTIFY, the in-process signal:
tests/runtime), claims racing from several processes at once (SKIP
LOCKED, SQLite's write lock: tests/runtime/test_dispatcher_processes.py),
and another process's commits (the fake's ``data_changed`` always answers
True, "cannot tell"; SQLite's data_version: tests/runtime).
"""

import dataclasses
import time

import pytest

from scheduler_app.dispatcher.timeline import Entry, schedule_entry
from scheduler_app.vocabulary.jobs import ClaimedJob, Outcome, Status
from scheduler_app.vocabulary.policy import LEASE_EXPIRED_CLASS, RELEASED_CLASS, error_entry
from tests.contract.conftest import ARGS, BACKOFF, LEASE, TASK, at

QUEUES = frozenset({"default", "slow"})


def ids(jobs):
    return [job.id for job in jobs]


def done(job, status=Status.SUCCEEDED, **kw):
    return Outcome(job.id, job.worker, job.attempt, status, **kw)


def an_error(job, now):
    return error_entry(job, exception_class="builtins.ValueError", message="boom", traceback_text="", now=at(now))


# -- reads -----------------------------------------------------------------


def test_a_window_holds_due_schedules_first_then_pending_jobs_by_time(harness, store, now):
    running = harness.add(now - 1)
    assert ids(store.claim(QUEUES, 1, now)) == [running]  # not pending: not in the window
    late = harness.add(now + 20, queue="slow")
    early = harness.add(now + 5, priority=-5)
    tie_a = harness.add(now + 10)
    tie_b = harness.add(now + 10, priority=50)  # same time: id decides, not priority
    harness.add(now + 100)  # past the window
    harness.add(now + 1, queue="other")  # a queue not served
    s_late = harness.add_schedule(now + 30)
    s_early = harness.add_schedule(now + 15)
    harness.add_schedule(now + 300)  # past the window

    assert store.load_window(QUEUES, now + 60, 100) == [
        schedule_entry(s_early, now + 15),
        schedule_entry(s_late, now + 30),
        Entry(early, now + 5, -5, "default"),
        Entry(tie_a, now + 10, 0, "default"),
        Entry(tie_b, now + 10, 50, "default"),
        Entry(late, now + 20, 0, "slow"),
    ]


def test_a_window_is_capped_at_limit_and_schedules_leave_room_for_jobs(harness, store, now):
    jobs = [harness.add(now + i) for i in range(1, 6)]
    schedules = [harness.add_schedule(now + 30 + i) for i in range(3)]
    # Schedules take at most half of a full window.
    assert store.load_window(QUEUES, now + 60, 4) == [
        schedule_entry(schedules[0], now + 30),
        schedule_entry(schedules[1], now + 31),
        Entry(jobs[0], now + 1, 0, "default"),
        Entry(jobs[1], now + 2, 0, "default"),
    ]
    assert store.load_window(QUEUES, now + 60, 1) == [schedule_entry(schedules[0], now + 30)]


def test_changes_are_the_pending_jobs_changed_since(harness, store, now):
    before = harness.add(now)
    time.sleep(0.02)
    since = time.time()
    time.sleep(0.02)
    a = harness.add(now + 5)
    b = harness.add(now + 6, queue="slow", priority=3)
    harness.add(now + 7, queue="other")
    entries = store.changes(QUEUES, since)
    assert sorted(entries, key=lambda e: e.id) == [Entry(a, now + 5, 0, "default"), Entry(b, now + 6, 3, "slow")]
    assert before not in ids(entries)
    # A job that stopped being pending is not a change the window needs.
    assert ids(store.claim(QUEUES, 1, now + 5, ids=[a])) == [a]
    assert ids(store.changes(QUEUES, since)) == [b]


def test_changes_past_limit_ask_for_a_reload(harness, store, now):
    since = time.time() - 1
    for i in range(3):
        harness.add(now + i)
    assert store.changes(QUEUES, since, 2) is None
    assert len(store.changes(QUEUES, since, 3)) == 3


def test_changes_give_a_schedule_with_nothing_to_run_an_entry_without_time(harness, store, now):
    since = time.time() - 1
    schedule_id = harness.add_schedule(now + 30)
    assert store.changes(QUEUES, since) == [schedule_entry(schedule_id, now + 30)]
    harness.disable_schedule(schedule_id)
    assert store.changes(QUEUES, since) == [schedule_entry(schedule_id, None)]


def test_any_due(harness, store, now):
    assert store.any_due(QUEUES, now) is False
    harness.add(now + 10)
    harness.add(now - 1, queue="other")
    assert store.any_due(QUEUES, now) is False
    assert store.any_due({"other"}, now) is True
    assert store.any_due(QUEUES, now + 10) is True


def test_paused_queues(harness, store, now):
    assert store.paused_queues() == set()
    harness.pause("slow")
    assert store.paused_queues() == {"slow"}
    harness.pause("other")
    harness.resume("slow")
    assert store.paused_queues() == {"other"}
    # The pause is part of the claim's condition: it holds from its commit,
    # whatever the loop last read of the flags.
    job = harness.add(now - 1, queue="other")
    assert store.claim({"other"}, 1, now) == []
    assert store.claim({"other"}, 1, now, ids=[job]) == []
    harness.resume("other")
    assert ids(store.claim({"other"}, 1, now)) == [job]


def test_data_changed_answers_a_bool(store):
    first, second = store.data_changed(), store.data_changed()
    # Nothing seen before the first call: "maybe", which is True.
    assert first is True and isinstance(second, bool)


# -- claims ------------------------------------------------------------------


def test_claim_returns_claimed_jobs_in_claim_order(harness, store, now):
    a = harness.add(now - 3)
    b = harness.add(now - 2, priority=10)
    c = harness.add(now - 1, priority=10)
    d = harness.add(now - 5, queue="slow")
    e = harness.add(now - 2)
    jobs = store.claim(QUEUES, 10, now)
    assert ids(jobs) == [b, c, d, a, e]  # priority desc, execute_at, id
    assert all(type(job) is ClaimedJob for job in jobs)
    first = jobs[0]
    assert (first.task, first.args, first.kwargs, first.queue, first.priority) == (TASK, ARGS, {}, "default", 10)
    assert (first.execute_at, first.started_at, first.last_attempted_at) == (
        pytest.approx(now - 2, abs=1e-6),
        at(now),
        at(now),
    )
    assert (first.attempt, first.max_attempts, first.timeout, first.cancel_requested) == (1, 1, None, False)
    assert first.worker == store.worker_id
    row = harness.row(b)
    assert (row["status"], row["attempts"], row["worker"]) == (Status.RUNNING, 1, store.worker_id)


def test_claim_respects_limit_queues_and_due_time(harness, store, now):
    a, b, c = (harness.add(now - 3 + i) for i in range(3))
    other = harness.add(now - 5, queue="other")
    later = harness.add(now + 10)
    assert ids(store.claim(QUEUES, 2, now)) == [a, b]
    assert store.claim(QUEUES, 0, now) == []
    assert ids(store.claim(QUEUES, 5, now)) == [c]
    assert store.claim(QUEUES, 5, now) == []
    assert ids(store.claim({"other"}, 5, now)) == [other]
    assert ids(store.claim(QUEUES, 5, now + 10)) == [later]


def test_claim_by_ids_takes_only_those_that_are_due_pending_and_served(harness, store, now):
    a = harness.add(now - 2)
    b = harness.add(now - 1, priority=5)
    c = harness.add(now - 1)
    future = harness.add(now + 60)
    other = harness.add(now - 1, queue="other")
    assert ids(store.claim(QUEUES, 10, now, ids=[c, future, other, 999_999])) == [c]
    assert store.claim(QUEUES, 10, now, ids=[c]) == []  # never twice
    # A limit below len(ids) is honoured; which id it keeps is not specified
    # (PostgreSQL's claim by ids does not sort; the loop never asks for fewer).
    (kept,) = ids(store.claim(QUEUES, 1, now, ids=[a, b]))
    assert ids(store.claim(QUEUES, 5, now, ids=[a, b])) == [{a: b, b: a}[kept]]
    assert ids(store.claim(QUEUES, 5, now, ids=[b, a])) == []


def test_a_job_is_claimed_once_whichever_dispatcher_asks(harness, store, now):
    jobs = [harness.add(now - 1) for _ in range(4)]
    other = harness.peer("contract-b")
    first = store.claim(QUEUES, 2, now)
    second = other.claim(QUEUES, 10, now)
    assert ids(first) == jobs[:2] and ids(second) == jobs[2:]
    assert {job.worker for job in second} == {"contract-b"}
    assert other.claim(QUEUES, 10, now, ids=ids(first)) == []
    assert store.claim(QUEUES, 10, now) == []


def test_claim_records_finished_outcomes_first(harness, store, now):
    a = harness.add(now - 2)
    b = harness.add(now - 1)
    (first,) = store.claim(QUEUES, 1, now)
    (second,) = store.claim(QUEUES, 1, now, finished=[done(first, result_json="3")])
    assert (first.id, second.id) == (a, b)
    assert harness.row(a)["status"] == Status.SUCCEEDED and harness.row(a)["result"] == 3
    assert store.claim(QUEUES, 0, now, finished=[done(second)]) == []
    assert harness.row(b)["status"] == Status.SUCCEEDED


# -- finishing ---------------------------------------------------------------


def test_finish_of_the_current_attempt_wins_once(harness, store, now):
    harness.add(now - 2)
    harness.add(now - 1)
    a, b = store.claim(QUEUES, 2, now)
    error = an_error(b, now)
    outcomes = [done(a, result_json="3"), done(b, Status.FAILED, error=error)]
    assert store.finish(outcomes, now) == {a.id, b.id}
    assert (harness.row(a.id)["status"], harness.row(a.id)["result"]) == (Status.SUCCEEDED, 3)
    assert (harness.row(b.id)["status"], harness.row(b.id)["errors"]) == (Status.FAILED, [error])
    assert store.finish(outcomes, now) == set()  # no running attempt left to match


def test_finish_of_a_stale_attempt_changes_nothing(harness, store, now):
    harness.add(now - 1, max_attempts=3)
    (job,) = store.claim(QUEUES, 1, now)
    assert store.finish([dataclasses.replace(done(job), attempt=job.attempt + 1)], now) == set()
    assert store.finish([dataclasses.replace(done(job), worker="contract-b")], now) == set()
    assert harness.row(job.id)["status"] == Status.RUNNING
    assert store.finish([done(job)], now) == {job.id}


def test_a_slow_finisher_never_overwrites_the_attempt_that_replaced_it(harness, store, now):
    harness.add(now - 1, max_attempts=3)
    (first,) = store.claim(QUEUES, 1, now)
    other = harness.peer("contract-b")
    later = now + LEASE + 1
    assert other.rescue(later) == 1  # this dispatcher stopped renewing
    assert other.claim(QUEUES, 1, later) == []  # the rescued attempt's job waits for its backoff
    later += BACKOFF
    (second,) = other.claim(QUEUES, 1, later)
    assert (second.id, second.attempt, second.worker) == (first.id, 2, "contract-b")
    assert store.finish([done(first)], later) == set()
    row = harness.row(first.id)
    assert (row["status"], row["worker"], row["attempts"]) == (Status.RUNNING, "contract-b", 2)
    assert other.finish([done(second)], later) == {first.id}


def test_finish_with_pending_is_a_retry_claimable_at_retry_at(harness, store, now):
    harness.add(now - 1, max_attempts=2)
    (job,) = store.claim(QUEUES, 1, now)
    retry_at = now + 10
    retry = done(job, Status.PENDING, error=an_error(job, now), retry_at=at(retry_at))
    assert store.finish([retry], now) == {job.id}
    assert harness.row(job.id)["status"] == Status.PENDING
    assert Entry(job.id, retry_at, 0, "default") in store.load_window(QUEUES, now + 60, 10)
    assert store.claim(QUEUES, 1, now + 5) == [] and not store.any_due(QUEUES, now + 5)
    assert store.any_due(QUEUES, retry_at)
    (again,) = store.claim(QUEUES, 1, retry_at)
    assert (again.id, again.attempt, again.execute_at) == (job.id, 2, pytest.approx(retry_at, abs=1e-6))


# -- leases --------------------------------------------------------------------


def test_renew_reports_this_dispatchers_running_jobs_whose_cancel_was_requested(harness, store, now):
    for _ in range(3):
        harness.add(now - 1)
    other = harness.peer("contract-b")
    mine = store.claim(QUEUES, 2, now)
    (theirs,) = other.claim(QUEUES, 1, now)
    assert store.renew(now) == set()
    harness.request_cancel(mine[0].id)
    harness.request_cancel(theirs.id)
    assert store.renew(now) == {mine[0].id}
    assert other.renew(now) == {theirs.id}


def test_cancel_requests_are_this_dispatchers_running_jobs_asked_to_stop(harness, store, now):
    for _ in range(3):
        harness.add(now - 1)
    other = harness.peer("contract-b")
    mine = store.claim(QUEUES, 2, now)
    (theirs,) = other.claim(QUEUES, 1, now)
    assert store.cancel_requests() == set()
    harness.request_cancel(mine[1].id)
    harness.request_cancel(theirs.id)
    assert store.cancel_requests() == {mine[1].id}
    assert other.cancel_requests() == {theirs.id}


def test_renew_extends_the_leases_it_holds(harness, store, now):
    harness.add(now - 1, max_attempts=3)
    store.claim(QUEUES, 1, now)
    store.renew(now + LEASE - 1)
    assert store.rescue(now + LEASE + 1) == 0
    assert store.rescue(now + 2 * LEASE) == 1


def test_rescue_takes_back_expired_attempts_and_counts_them(harness, store, now):
    retried = harness.add(now - 3, max_attempts=2)
    lost = harness.add(now - 2, max_attempts=1)
    cancelled = harness.add(now - 1, max_attempts=2)
    store.claim(QUEUES, 3, now)
    harness.request_cancel(cancelled)
    count = store.rescue(now + LEASE - 1)
    assert type(count) is int and count == 0
    assert store.rescue(now + LEASE + 1) == 3
    statuses = [harness.row(i)["status"] for i in (retried, lost, cancelled)]
    assert statuses == [Status.PENDING, Status.FAILED, Status.CANCELLED]
    assert harness.row(lost)["errors"][-1]["exception_class"] == LEASE_EXPIRED_CLASS
    assert store.claim(QUEUES, 5, now + LEASE + 1) == []  # the task's backoff first
    (again,) = store.claim(QUEUES, 5, now + LEASE + 1 + BACKOFF)
    assert (again.id, again.attempt) == (retried, 2)  # the lost attempt counted
    assert store.rescue(now + LEASE + 2 + BACKOFF) == 0


def test_a_release_hands_attempts_back_only_once_their_dispatcher_is_gone(harness, store, now):
    job_id = harness.add(now - 1, max_attempts=3)
    store.register(queues=QUEUES, slots={"*": 1})
    (job,) = store.claim(QUEUES, 1, now)
    peer = harness.peer("contract-b")
    assert store.release([job], now) == {job_id}
    # Handed back, visibly: still running (no claim takes it) while its dispatcher may run it.
    row = harness.row(job_id)
    assert (row["status"], row["attempts"]) == (Status.RUNNING, 1)
    assert row["errors"][-1]["exception_class"] == RELEASED_CLASS and row["errors"][-1]["attempt"] == 1
    assert peer.claim(QUEUES, 1, now + 1) == []
    assert peer.rescue(now + 10 * LEASE) == 0  # no lease to expire: only its dispatcher's end frees it
    assert peer.take_back(now + 1) == (0, 1)
    store.retire()
    assert peer.take_back(now + 2) == (1, 0)
    row = harness.row(job_id)
    assert (row["status"], row["attempts"]) == (Status.PENDING, 0)  # the released attempt is not counted
    assert peer.take_back(now + 3) == (0, 0)
    (again,) = peer.claim(QUEUES, 1, now + 3)
    assert again.attempt == 1


def test_a_release_matches_only_this_dispatchers_current_attempts(harness, store, now):
    job_id = harness.add(now - 1, max_attempts=3)
    (job,) = store.claim(QUEUES, 1, now)
    assert harness.peer("contract-b").release([job], now) == set()
    assert store.release([dataclasses.replace(job, attempt=2)], now) == set()
    row = harness.row(job_id)
    assert (row["status"], row["errors"]) == (Status.RUNNING, [])
    assert harness.peer("contract-b").take_back(now) == (0, 0)


# -- schedules and this dispatcher's row ---------------------------------------


def test_materialize_enqueues_due_schedules_and_returns_their_next_runs(harness, store, now):
    due = harness.add_schedule(now + 5, interval=3600)
    idle = harness.add_schedule(now + 600, interval=3600)
    jobs = harness.job_count()
    entries = store.materialize(now + 10, [idle])
    assert sorted(entries, key=lambda e: e.id) == [schedule_entry(due, now + 3605), schedule_entry(idle, now + 600)]
    assert harness.job_count() == jobs + 1
    (job,) = store.claim(QUEUES, 5, now + 10)
    assert (job.task, job.execute_at) == (TASK, pytest.approx(now + 5, abs=1e-6))
    assert store.materialize(now + 10) == [] and harness.job_count() == jobs + 1


def test_register_heartbeat_unregister_keep_this_dispatchers_row(harness, store, now):
    assert store.register(queues=QUEUES, slots={"*": 2}) is None
    assert harness.worker_row()["state"] == "alive"
    assert store.heartbeat(now, running=1, processed=5, failed=2) is None
    assert harness.worker_row() == {"state": "alive", "running": 1, "processed": 5, "failed": 2}
    assert store.unregister(processed=6, failed=2) is None
    assert harness.worker_row() == {"state": "stopped", "running": 0, "processed": 6, "failed": 2}


# -- rollups -------------------------------------------------------------------


def test_rollups_written_by_several_dispatchers_add_up(harness, store, now):
    from scheduler_app.vocabulary.tallies import Tally

    def tally(started, succeeded, wait):
        t = Tally(started=started, succeeded=succeeded)
        t.wait.add(wait)
        return t

    minute = float(int(now // 60) * 60)
    store.write_rollups({(minute, "default", TASK): tally(1, 1, 0.5)}, now)
    harness.peer("contract-b").write_rollups(
        {(minute, "default", TASK): tally(2, 0, 3.0), (minute, "slow", TASK): tally(1, 0, 0.1)}, now
    )
    store.write_rollups({}, now)  # nothing gathered: nothing changes
    assert harness.rollups() == {
        (minute, "default", TASK): (3, 1, 0, 0, 0, 2, 3.0),
        (minute, "slow", TASK): (1, 0, 0, 0, 0, 1, 0.1),
    }
