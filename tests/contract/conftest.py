"""The two stores under one contract, each behind a harness that arranges data the store's own way.

A harness sets up what a case needs (jobs, schedules, paused queues, a
cancel request) and reads back what the store wrote; the cases then call
only ``protocol.Store`` methods. The fake's harness writes its dicts; the
Django harness goes through ``scheduler_app.lifecycle`` and
``scheduler_app.schedules``, as the admin and the API do.
"""

import json
import time
from datetime import UTC, datetime

import pytest

from scheduler_app.vocabulary.clock import SystemClock
from scheduler_app.vocabulary.policy import RetryPolicy
from tests.dispatcher.fakes import FakeStore

LEASE = 30.0
# Both stores' retry policy: a rescued attempt's job runs again BACKOFF * 2 ** (attempt - 1) s later.
BACKOFF = 5.0
POLICY = RetryPolicy(base=BACKOFF, jitter=0.0)
TASK = "tests.testapp.tasks.add"
ARGS = [1, 2]


def at(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


class FakeHarness:
    kind = "fake"

    def __init__(self):
        # Real time, as the database's updated_at columns use it.
        self.store = FakeStore(SystemClock(), worker_id="contract-a", lease=LEASE, policy=POLICY)
        self._ids = iter(range(1, 1_000_000))
        self._schedule_ids = iter(range(1, 1_000_000))

    def peer(self, worker_id):
        return self.store.peer(worker_id)

    def add(self, execute_at, *, priority=0, queue="default", max_attempts=1):
        job_id = next(self._ids)
        self.store.add(
            job_id, execute_at, priority=priority, queue=queue, max_attempts=max_attempts, task=TASK, args=list(ARGS)
        )
        return job_id

    def add_schedule(self, next_run, interval=3600):
        schedule_id = next(self._schedule_ids)
        self.store.add_schedule(schedule_id, next_run, interval, task=TASK, args=list(ARGS))
        return schedule_id

    def disable_schedule(self, schedule_id):
        schedule = self.store.schedules[schedule_id]
        schedule.at, schedule.updated = None, time.time()

    def request_cancel(self, job_id):
        self.store.jobs[job_id].cancel_requested = True

    def pause(self, queue):
        self.store.paused.add(queue)

    def resume(self, queue):
        self.store.paused.discard(queue)

    def set_limits(self, queue, *, concurrency=None, rate=None, period=1.0):
        self.store.set_limits(queue, concurrency=concurrency, rate=rate, period=period)

    def row(self, job_id):
        r = self.store.jobs[job_id]
        result = json.loads(r.result_json) if r.result_json is not None else None
        return {
            "status": r.status,
            "attempts": r.attempts,
            "worker": r.worker,
            "errors": r.errors,
            "result": result,
            "snoozes": r.snoozes,
        }

    def job_count(self):
        return len(self.store.jobs)

    def worker_row(self):
        return {k: self.store.worker_row[k] for k in ("state", "running", "processed", "failed")}

    def rollups(self):
        """Return ``{(minute epoch, queue, task): (started, succeeded, failed, retried, cancelled, wait count, wait max)}``."""
        return {
            key: (t.started, t.succeeded, t.failed, t.retried, t.cancelled, sum(t.wait.counts), t.wait.max)
            for key, t in self.store.rollups.items()
        }

    def close(self):
        pass


class DjangoHarness:
    kind = "django"

    def __init__(self):
        from scheduler_app.runtime.store import DjangoStore

        self.store = DjangoStore("contract-a", lease=LEASE, prune=False, policy=POLICY)
        self._peers = []

    def peer(self, worker_id):
        from scheduler_app.runtime.store import DjangoStore

        store = DjangoStore(worker_id, lease=LEASE, prune=False, policy=POLICY)
        self._peers.append(store)
        return store

    def add(self, execute_at, *, priority=0, queue="default", max_attempts=1):
        from scheduler_app import lifecycle

        job, _ = lifecycle.enqueue(
            TASK, ARGS, execute_at=at(execute_at), priority=priority, queue=queue, max_attempts=max_attempts
        )
        return job.pk

    def add_schedule(self, next_run, interval=3600):
        from scheduler_app import schedules

        # Without runs so far, an interval schedule's first run is its start.
        schedule = schedules.create(
            name=f"contract-{next_run}-{time.monotonic_ns()}",
            task=TASK,
            args=ARGS,
            interval_seconds=interval,
            start_at=at(next_run),
        )
        assert schedule.next_run_at == at(next_run)
        return schedule.pk

    def disable_schedule(self, schedule_id):
        from scheduler_app import schedules

        schedules.disable(schedule_id)

    def request_cancel(self, job_id):
        from scheduler_app import lifecycle

        assert lifecycle.cancel(job_id) == "cancel_requested"

    def pause(self, queue):
        from scheduler_app import lifecycle

        lifecycle.pause_queue(queue)

    def resume(self, queue):
        from scheduler_app import lifecycle

        lifecycle.resume_queue(queue)

    def set_limits(self, queue, *, concurrency=None, rate=None, period=1.0):
        from scheduler_app import lifecycle

        lifecycle.set_limits(queue, concurrency_limit=concurrency, rate_limit=rate, rate_period=period)

    def row(self, job_id):
        from scheduler_app.models import Job

        return Job.objects.values("status", "attempts", "worker", "errors", "result", "snoozes").get(pk=job_id)

    def job_count(self):
        from scheduler_app.models import Job

        return Job.objects.count()

    def worker_row(self):
        from scheduler_app.models import Worker

        return Worker.objects.values("state", "running", "processed", "failed").get(pk=self.store.worker_id)

    def rollups(self):
        from scheduler_app.models import Rollup

        found = {}
        for r in Rollup.objects.exclude(task=""):
            waits = sum(getattr(r, f"wait_{i}") for i in range(13))
            found[(r.minute.timestamp(), r.queue, r.task)] = (
                r.started,
                r.succeeded,
                r.failed,
                r.retried,
                r.cancelled,
                waits,
                r.wait_max,
            )
        return found

    def close(self):
        # The PostgreSQL store's own connection would keep the test database from being dropped.
        for store in [self.store, *self._peers]:
            store.reset()
            store.retire()  # its liveness lock: a session (PostgreSQL) or a file (SQLite) of its own


@pytest.fixture(params=["fake", pytest.param("django", marks=pytest.mark.django_db(transaction=True))])
def harness(request):
    h = FakeHarness() if request.param == "fake" else DjangoHarness()
    yield h
    h.close()


@pytest.fixture
def store(harness):
    return harness.store


@pytest.fixture
def now():
    """The cases' clock: real time (the database stamps changes with it), to the whole second."""
    return float(int(time.time()))
