"""An in-memory store for driving the dispatcher loop without a database."""

import threading
from dataclasses import dataclass, field

from scheduler_app.dispatcher.timeline import Entry, schedule_entry
from scheduler_app.dispatcher.types import Outcome


class TransientError(Exception):
    pass


@dataclass
class FakeJob:
    id: int
    at: float
    priority: int = 0
    queue: str = "default"
    status: str = "pending"
    attempt: int = 0
    timeout: float | None = None
    cancel_requested: bool = False
    sleep: float = 0.0
    # Set by the test to let the job return: until then it runs on, deaf to
    # its cancel flag (a task that does not cooperate).
    hold: threading.Event | None = None
    raises: bool = False
    runs: list = field(default_factory=list)
    worker: str = "fake"
    max_attempts: int = 1


class FakeStore:
    """Implements what the loop asks of a store, over a dict, with call counters."""

    transient_errors = (TransientError,)

    def __init__(self, clock):
        self.clock = clock
        self.jobs = {}
        self.schedules = {}  # id -> [next_run epoch, interval seconds]
        self.materialized = []  # (schedule id, run time) per job made
        self.claims = []  # (queues, limit, returned ids)
        self.claim_ids = []  # the ids asked for, per claim (None: by query)
        self.finished = []
        self.released = []
        self.fail_next = 0
        self.changed = []  # entries the change poll returns
        self.change_limits = []  # the limit of each change poll
        self.lock = threading.Lock()
        self.registered = self.unregistered = False

    def add(self, job_id, at, **kw):
        self.jobs[job_id] = FakeJob(job_id, at, **kw)
        return self.jobs[job_id]

    def _maybe_fail(self):
        if self.fail_next:
            self.fail_next -= 1
            raise TransientError("database down")

    def register(self, *, queues, slots):
        self.registered = True

    def unregister(self, *, processed, failed):
        self.unregistered = True

    def reset(self):
        pass

    def load_window(self, queues, until, limit):
        self._maybe_fail()
        planned = [
            schedule_entry(i, at) for i, (at, _) in sorted(self.schedules.items()) if at is not None and at <= until
        ]
        rows = sorted(
            (j for j in self.jobs.values() if j.status == "pending" and j.queue in queues and j.at <= until),
            key=lambda j: (j.at, j.id),
        )[:limit]
        return planned + [Entry(j.id, j.at, j.priority, j.queue) for j in rows][: limit - len(planned)]

    def changes(self, queues, since, limit=None):
        self._maybe_fail()
        self.change_limits.append(limit)
        changed = [e for e in self.changed if e.queue in queues]
        if limit is not None and len(changed) > limit:
            return None, None
        return changed, (since if changed else None)

    def add_schedule(self, schedule_id, at, interval):
        self.schedules[schedule_id] = [at, interval]

    def materialize(self, now, ids=()):
        """Turn due schedules into jobs (one per run), as the Django store does."""
        self._maybe_fail()
        out = []
        for schedule_id, spec in self.schedules.items():
            at, interval = spec
            if at is not None and at <= now:
                job_id = 1_000_000 + len(self.materialized)
                self.add(job_id, at)
                self.materialized.append((schedule_id, at))
                spec[0] = at + interval * (int((now - at) // interval) + 1)
            if at is not None and at <= now or schedule_id in ids:
                out.append(schedule_entry(schedule_id, spec[0]))
        return out

    def claim(self, queues, limit, now, ids=None, finished=()):
        self._maybe_fail()
        self.claim_ids.append(ids)
        if finished:
            self.finish(finished, now)
        due = sorted(
            (
                j
                for j in self.jobs.values()
                if j.status == "pending" and j.queue in queues and j.at <= now and (ids is None or j.id in ids)
            ),
            key=lambda j: (-j.priority, j.at, j.id),
        )[:limit]
        for job in due:
            job.status = "running"
            job.attempt += 1
        self.claims.append((set(queues), limit, [j.id for j in due]))
        return due

    def finish(self, outcomes, now):
        self._maybe_fail()
        for o in outcomes:
            self.jobs[o.job_id].status = o.status
        self.finished.extend(outcomes)
        return {o.job_id for o in outcomes}

    def renew(self, now):
        return {j.id for j in self.jobs.values() if j.status == "running" and j.cancel_requested}

    def rescue(self, now):
        return 0

    def heartbeat(self, now, *, running, processed, failed):
        pass

    def paused_queues(self):
        return set()

    def housekeeping(self, now):
        pass

    def any_due(self, queues, now):
        return any(j.status == "pending" and j.queue in queues and j.at <= now for j in self.jobs.values())

    def release(self, jobs, now):
        for job in jobs:
            self.jobs[job.id].status = "pending"
        self.released.extend(j.id for j in jobs)
        return {j.id for j in jobs}


def execute(job, cancel_event, deadline):
    """A fake executor: records the run, waits for ``hold``, sleeps (cooperatively), may raise."""
    import time

    job.runs.append(time.monotonic())
    if job.hold is not None:
        job.hold.wait(30)  # a hang guard: tests set it long before
    end = time.monotonic() + job.sleep
    while time.monotonic() < end:
        if cancel_event.is_set():
            return Outcome(job.id, job.worker, job.attempt, "cancelled")
        time.sleep(0.005)
    if job.raises:
        raise RuntimeError("executor bug")
    return Outcome(job.id, job.worker, job.attempt, "succeeded")
