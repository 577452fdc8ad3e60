"""dispatcher/rollup.py: buckets, percentiles, tallies, and the loop writing them once per interval."""

from dataclasses import replace

from scheduler_app.dispatcher.rollups import Rollups
from scheduler_app.vocabulary.jobs import Outcome, Status
from scheduler_app.vocabulary.tallies import BUCKETS, SLOTS, Histogram, Tally, bucket_of, percentile
from tests.dispatcher.fake_executor import claimed_job
from tests.dispatcher.test_loop import make, settle


def test_buckets_are_the_issues_and_upper_bounds_are_inclusive():
    assert BUCKETS == (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300) and SLOTS == 13
    assert [bucket_of(v) for v in (0, 0.001, 0.0011, 0.5, 1, 299, 300, 301, 1e9)] == [0, 0, 1, 5, 6, 11, 11, 12, 12]


def test_percentiles_interpolate_within_a_bucket_and_never_pass_the_maximum():
    h = Histogram()
    for v in [0.002] * 50 + [0.2] * 50:
        h.add(v)
    assert percentile(h.counts, 0.5, h.max) == 0.005  # the top of the 0.001..0.005 bucket
    assert 0.1 < percentile(h.counts, 0.95, h.max) <= 0.2
    assert percentile([0] * SLOTS, 0.5) is None
    big = Histogram()
    big.add(1000.0)
    assert 300 < percentile(big.counts, 0.99, big.max) <= 1000.0


def test_tallies_merge_by_adding():
    a, b = Tally(started=1, succeeded=1), Tally(started=2, failed=1)
    a.wait.add(0.01)
    b.wait.add(5)
    a.merge(b)
    assert (a.started, a.succeeded, a.failed, a.wait.max, sum(a.wait.counts)) == (3, 1, 1, 5, 2)


def test_rollups_count_starts_outcomes_and_times_per_minute_queue_and_task():
    rollups = Rollups()
    job = replace(claimed_job(1), execute_at=1000.0, task="t", queue="q")
    started = replace(
        job, last_attempted_at=job.last_attempted_at.__class__.fromtimestamp(1000.5, job.last_attempted_at.tzinfo)
    )
    rollups.started(started, 1000.5)
    rollups.finished(started, Outcome(1, "w", 1, Status.PENDING), 1002.5)
    rollups.finished(started, Outcome(1, "w", 1, Status.SUCCEEDED), 1062.0)
    taken = rollups.take()
    assert set(taken) == {(960.0, "q", "t"), (1020.0, "q", "t")}
    first = taken[(960.0, "q", "t")]
    assert (first.started, first.retried, first.wait.max, first.run.max) == (1, 1, 0.5, 2.0)
    assert taken[(1020.0, "q", "t")].succeeded == 1
    assert len(rollups) == 0
    rollups.put_back(taken)
    assert len(rollups) == 2


def test_the_loop_writes_its_rollups_once_per_interval_and_keeps_them_when_the_write_fails():
    dispatcher, store, clock = make(rollup_interval=60.0)
    store.add(1, 999.0)
    store.add(2, 999.0, raises=True)
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == "succeeded" and store.jobs[2].status != "running")
    assert store.rollup_writes == []  # the first write comes an interval after the first tick
    store.fail_next = 1
    clock.advance(60.0)
    dispatcher.tick(clock.time())  # the write fails: kept for next time
    assert not store.rollups
    clock.advance(60.0)
    dispatcher.tick(clock.time())
    (tally,) = store.rollups.values()
    assert (tally.started, tally.succeeded, tally.failed) == (2, 1, 1)
    assert sum(tally.wait.counts) == 2 and sum(tally.run.counts) == 2


def test_without_an_interval_nothing_is_gathered():
    dispatcher, store, clock = make()
    store.add(1, 999.0)
    assert settle(dispatcher, clock, lambda: store.jobs[1].status == "succeeded")
    assert dispatcher.rollups is None and store.rollup_writes == []


def test_each_rollup_write_logs_one_info_summary_and_an_idle_interval_logs_none(caplog):
    import logging

    dispatcher, store, clock = make(rollup_interval=60.0)
    for job_id in (1, 2, 3):
        store.add(job_id, 999.0, raises=job_id == 3)
    assert settle(dispatcher, clock, lambda: all(store.jobs[i].status != "running" for i in (1, 2, 3)))
    with caplog.at_level(logging.INFO, logger="scheduler_app.dispatcher.loop"):
        clock.advance(60.0)
        dispatcher.tick(clock.time())
        clock.advance(60.0)
        dispatcher.tick(clock.time())  # nothing happened in this interval: no line
    lines = [r for r in caplog.records if getattr(r, "action", None) == "summary"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    text = lines[0].getMessage()
    assert "last 60s: 3 started, 3 ended (2 succeeded, 1 failed, 0 retried, 0 cancelled)" in text, text
    assert "; wait p50 " in text and "; run p50 " in text, text
    assert text.startswith("dispatcher fake last 60s") and text.endswith("0/2 slots busy"), text


def test_a_batch_counts_as_its_jobs_one_by_one_whatever_their_queues_and_tasks():
    jobs = [
        replace(claimed_job(i), execute_at=1000.0 - i, queue=queue, task=task)
        for i, (queue, task) in enumerate([("q", "t"), ("q", "t"), ("r", "t"), ("q", "u"), ("q", "t")])
    ]
    statuses = [Status.SUCCEEDED, Status.FAILED, Status.PENDING, Status.CANCELLED, Status.SUCCEEDED]
    one_by_one, batched = Rollups(), Rollups()
    for job, status in zip(jobs, statuses, strict=True):
        one_by_one.started(job, 1000.5)
        one_by_one.finished(job, Outcome(job.id, "w", 1, status), 1001.0)
    batched.started_many(jobs, 1000.5)
    batched.finished_many([(j, Outcome(j.id, "w", 1, s)) for j, s in zip(jobs, statuses, strict=True)], 1001.0)
    assert batched.take() == one_by_one.take()
    assert len(one_by_one) == 0
