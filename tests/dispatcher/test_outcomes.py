"""The outcome buffer: attempts that ended, until written; its counts, the rollups it feeds, the
limited queues it frees (their slots free on the gate at once, other dispatchers are told once written)."""

from dataclasses import replace

from scheduler_app.dispatcher.gate import Gate
from scheduler_app.dispatcher.outcomes import OutcomeBuffer
from scheduler_app.dispatcher.rollups import Rollups
from scheduler_app.vocabulary.jobs import Outcome, Status
from tests.dispatcher.fakes import FakeClock, FakeStore, claimed_job


def job(job_id, queue="default", task="fake"):
    return replace(claimed_job(job_id), queue=queue, task=task)


def ended(job_id, status=Status.SUCCEEDED):
    return Outcome(job_id, "fake", 1, status)


class RecordingRollups:
    def __init__(self):
        self.calls = []

    def finished_many(self, ended, now):
        self.calls.extend((job.id, outcome.status, now) for job, outcome in ended)


def make(*limited, rollups=None):
    gate = Gate(retry_interval=5.0)
    gate.update(limited)
    store = FakeStore(FakeClock(1000.0))
    return OutcomeBuffer(gate, rollups), gate, store


def test_outcomes_wait_in_order_until_written():
    buffer, _, store = make()
    outcomes = [ended(i) for i in range(3)]
    for i, outcome in enumerate(outcomes):
        buffer.add(job(i), outcome, 1000.0)
    assert buffer.pending == outcomes
    buffer.written(store, 1000.0)
    assert buffer.pending == []


def test_outcomes_stay_until_a_write_succeeds():
    # A write that failed (the database is down) does not call written(): nothing is lost.
    buffer, _, store = make()
    buffer.add(job(1), ended(1), 1000.0)
    buffer.add(job(2), ended(2), 1001.0)
    assert [o.job_id for o in buffer.pending] == [1, 2]
    buffer.add(job(3), ended(3), 1002.0)
    assert [o.job_id for o in buffer.pending] == [1, 2, 3]
    buffer.written(store, 1003.0)
    assert buffer.pending == []


def test_counts_every_outcome_and_the_failures_among_them():
    buffer, _, store = make()
    statuses = [Status.SUCCEEDED, Status.FAILED, Status.PENDING, Status.CANCELLED, Status.FAILED]
    for i, status in enumerate(statuses):
        buffer.add(job(i), ended(i, status), 1000.0)
    # A retry (pending) is not a failure of the job, nor is a cancel.
    assert (buffer.processed, buffer.failed) == (5, 2)
    buffer.written(store, 1000.0)
    assert (buffer.processed, buffer.failed) == (5, 2)  # counts outlive the writes


def test_every_outcome_feeds_the_rollups_with_its_job_and_time():
    rollups = RecordingRollups()
    buffer, _, _ = make(rollups=rollups)
    buffer.add(job(1), ended(1), 1000.5)
    buffer.add(job(2), ended(2, Status.FAILED), 1001.5)
    assert rollups.calls == [(1, Status.SUCCEEDED, 1000.5), (2, Status.FAILED, 1001.5)]


def test_real_rollups_count_the_endings():
    rollups = Rollups()
    buffer, _, _ = make(rollups=rollups)
    buffer.add(job(1, task="t"), ended(1), 1_800_000_030.0)
    buffer.add(job(2, task="t"), ended(2, Status.FAILED), 1_800_000_031.0)
    ((key, tally),) = rollups.take().items()
    assert key == (1_800_000_000.0, "default", "t")
    assert (tally.succeeded, tally.failed) == (1, 1)


def test_without_rollups_nothing_is_fed():
    buffer, _, _ = make(rollups=None)
    buffer.add(job(1), ended(1), 1000.0)
    assert buffer.processed == 1


def test_an_outcome_of_a_limited_queue_frees_its_concurrency_block_at_once():
    buffer, gate, _ = make("lim")
    gate.block("lim", None, now=1000.0)
    buffer.add(job(1, "lim"), ended(1), 1000.0)
    # This dispatcher may claim in it again: the claim that writes the outcome counts it as ended.
    assert gate.blocked(1000.0) == set()


def test_an_outcome_leaves_a_rate_block_be():
    buffer, gate, _ = make("lim")
    gate.block("lim", 1060.0, now=1000.0)
    buffer.add(job(1, "lim"), ended(1), 1000.0)
    assert gate.blocked(1000.0) == {"lim"}


def test_an_outcome_of_another_queue_frees_nothing():
    buffer, gate, store = make("lim")
    gate.block("lim", None, now=1000.0)
    buffer.add(job(1, "default"), ended(1), 1000.0)
    assert gate.blocked(1000.0) == {"lim"}
    buffer.written(store, 1000.0)
    assert store.freed == []


def test_other_dispatchers_are_told_once_the_outcomes_are_written():
    buffer, _, store = make("a", "b")
    buffer.add(job(1, "a"), ended(1), 1000.0)
    buffer.add(job(2, "a"), ended(2, Status.FAILED), 1000.0)
    buffer.add(job(3, "b"), ended(3), 1000.0)
    buffer.add(job(4, "default"), ended(4), 1000.0)
    # Not before: the room exists for them only when the database has the outcomes.
    assert store.freed == []
    buffer.written(store, 1000.0)
    assert store.freed == [{"a", "b"}]
    buffer.written(store, 1010.0)  # nothing new: nothing told
    assert store.freed == [{"a", "b"}]


def test_telling_is_throttled_per_queue_and_what_is_not_told_is_not_kept():
    buffer, _, store = make("a", "b")
    buffer.add(job(1, "a"), ended(1), 1000.0)
    buffer.written(store, 1000.0)
    buffer.add(job(2, "a"), ended(2), 1000.0)
    buffer.add(job(3, "b"), ended(3), 1000.0)
    buffer.written(store, 1000.0 + Gate.TELL_EVERY / 2)  # a was told just now
    assert store.freed == [{"a"}, {"b"}]
    buffer.written(store, 1000.0 + Gate.TELL_EVERY * 2)  # no new outcome: no message
    assert store.freed == [{"a"}, {"b"}]


def test_a_queue_that_lost_its_limits_is_not_told_about():
    buffer, gate, store = make("a")
    gate.update(set())
    buffer.add(job(1, "a"), ended(1), 1000.0)
    buffer.written(store, 1000.0)
    assert store.freed == []


def test_no_message_when_every_freed_queue_was_told_just_now():
    buffer, _, store = make("a")
    buffer.add(job(1, "a"), ended(1), 1000.0)
    buffer.written(store, 1000.0)
    buffer.add(job(2, "a"), ended(2), 1000.0)
    buffer.written(store, 1000.0 + Gate.TELL_EVERY / 2)
    assert store.freed == [{"a"}]  # not an empty NOTIFY


def test_a_batch_is_kept_counted_and_frees_its_limited_queues_as_one_by_one():
    rollups = RecordingRollups()
    buffer, gate, store = make("lim", rollups=rollups)
    gate.block("lim", None, now=1000.0)
    batch = [(job(1), ended(1)), (job(2, queue="lim"), ended(2, Status.FAILED)), (job(3), ended(3))]
    buffer.add_many(batch, 1000.0)
    assert buffer.pending == [outcome for _, outcome in batch]
    assert (buffer.processed, buffer.failed) == (3, 1)
    assert rollups.calls == [(1, Status.SUCCEEDED, 1000.0), (2, Status.FAILED, 1000.0), (3, Status.SUCCEEDED, 1000.0)]
    assert gate.blocked(1000.0) == set()
    assert store.freed == []
    buffer.written(store, 1000.0)
    assert buffer.pending == [] and store.freed == [{"lim"}]
