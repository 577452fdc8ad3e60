"""Metrics within seconds: /metrics counts an attempt at most 15 s after it ended; the history stays per minute."""

import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from django.test import Client

from scheduler_app import lifecycle
from scheduler_app.dispatcher.rollups import FRESH_EVERY, Reporter
from scheduler_app.models import Job, Rollup
from scheduler_app.vocabulary.jobs import Outcome, Status
from tests.dispatcher.fake_executor import claimed_job
from tests.dispatcher.fakes import FakeClock
from tests.observability.test_metrics import samples
from tests.plumbing import ADD, grant, run_until, settle, ticking_dispatcher


class Recorder:
    worker_id = "w"

    def __init__(self):
        self.writes = []  # (now, samples, {key: (started, succeeded)})

    def write_rollups(self, tallies, now, *, samples=True):
        self.writes.append((now, samples, {k: (t.started, t.succeeded) for k, t in tallies.items()}))


class Log:
    def isEnabledFor(self, level):
        return True

    def info(self, *args, **kwargs):
        self.line = args[2]


def test_the_reporter_writes_tallies_within_seconds_and_samples_once_an_interval():
    store, log = Recorder(), Log()
    reporter = Reporter(60.0, log)
    assert not reporter.due(1000.0)  # starts the clock: the full write at 1060
    assert reporter.next_write == 1060.0  # nothing gathered: no early write
    job = replace(claimed_job(1), last_attempted_at=datetime.fromtimestamp(1001.0, UTC))
    reporter.started(job, 1001.0)
    reporter.finished(job, Outcome(1, "w", 1, Status.SUCCEEDED), 1002.0)
    assert reporter.next_write == 1001.0 + FRESH_EVERY <= 1002.0 + 15
    assert not reporter.due(1010.0) and reporter.due(1011.0)
    reporter.write(store, 1011.0, busy=0, slots=4)
    [(at, with_samples, tallies)] = store.writes
    assert (at, with_samples) == (1011.0, False)
    assert list(tallies.values()) == [(1, 1)]
    assert reporter.next_write == 1060.0  # nothing new since: the full write next
    reporter.started(job, 1030.0)
    reporter.write(store, 1060.0, busy=0, slots=4)
    assert store.writes[-1][:2] == (1060.0, True)
    assert list(store.writes[-1][2].values()) == [(1, 0)]  # only what the partial write did not write
    assert "2 started" in log.line  # the minute's summary line covers both writes


@pytest.mark.django_db(transaction=True)
def test_metrics_count_an_attempt_within_15_seconds_and_the_history_keeps_its_minutes(staff_user):
    grant(staff_user, "scheduler_app.view_job")
    client = Client()
    client.force_login(staff_user)
    jobs = [lifecycle.enqueue(ADD, [i, i])[0] for i in range(3)]
    key = (("outcome", "succeeded"), ("queue", "default"), ("task", ADD))

    def counted():
        return samples(client.get("/metrics").content).get(("scheduler_jobs_finished_total", key)) == 3

    clock = FakeClock(float(int(time.time())) + 2)  # a whole second at which the three are due
    with ticking_dispatcher(clock, rollup_interval=60.0) as dispatcher:
        assert settle(dispatcher, clock, lambda: Job.objects.filter(status="succeeded").count() == 3)
        ended = clock.time()
        # The loop wakes itself for the write: ticked at the moments it asks for, the
        # count shows within 15 s of loop time (its other timers are an hour away).
        assert run_until(dispatcher, clock, counted, until=ended + 3600)
        assert clock.time() - ended <= 15.0
        found = samples(client.get("/metrics").content)
        assert found[("scheduler_job_duration_seconds_count", (("queue", "default"), ("task", ADD)))] == 3
        assert found[("scheduler_job_wait_seconds_count", (("queue", "default"),))] == 3
        # The history has the attempts in their minute, and no queue sample before the minute's write.
        assert sum(Rollup.objects.filter(task=ADD).values_list("succeeded", flat=True)) == 3
        assert not Rollup.objects.filter(task="").exists()
    assert all(Job.objects.get(pk=j.pk).status == "succeeded" for j in jobs)
