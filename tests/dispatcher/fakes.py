"""An in-memory store for driving the dispatcher loop without a database.

``FakeStore`` implements ``dispatcher.protocol.Store`` over dicts; the
contract suite (``tests/contract/test_store_contract.py``) runs the same
cases against it and against ``DjangoStore``, so the two cannot drift.
Several FakeStores made with ``peer()`` share one set of tables, as several
dispatchers share one database.

What a test wants a job to do when it runs (sleep, raise) is not part of a
claimed job: it is kept beside it, by job id, for ``FakeExecutor``.

What the fake does not do: announce changes (loop tests deliver wake-ups by
hand; ``notify_freed`` only records its calls), know about other processes'
commits (``data_changed`` is always True), keep Worker rows of other
dispatchers (the maintenance only rescues and expires), or know dependencies
between jobs (they are the lifecycle's, above the store).
"""

import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime

from scheduler_app.dispatcher.timeline import Entry, schedule_entry
from scheduler_app.vocabulary.jobs import ClaimedJob, Status, attempt_end
from scheduler_app.vocabulary.policy import (
    LEASE_EXPIRED_CLASS,
    LEASE_EXPIRED_MESSAGE,
    RELEASED_CLASS,
    RELEASED_MESSAGE,
    RetryPolicy,
)
from tests.dispatcher.fake_executor import FakeExecutor, claimed_job  # noqa: F401  (re-exported for the tests)

# Ids of the jobs the fake's schedules make.
SCHEDULED_JOB_IDS = 1_000_000


class TransientError(Exception):
    pass


def to_datetime(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


@dataclass
class FakeRow:
    """A job as the fake stores it: the columns the store reads and writes (times in epoch seconds)."""

    id: int
    at: float  # execute_at
    priority: int = 0
    queue: str = "default"
    task: str = "fake"
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    status: str = Status.PENDING
    attempts: int = 0
    max_attempts: int = 1
    timeout: float | None = None
    cancel_requested: bool = False
    worker: str = ""  # the id of the dispatcher that claimed the current or last attempt
    lease_until: float | None = None
    started_at: float | None = None  # the first attempt's start
    last_attempted_at: float | None = None
    result_json: str | None = None
    errors: list = field(default_factory=list)
    snoozes: int = 0
    updated: float = 0.0
    key: str | None = None  # concurrency_key
    key_limit: int = 1  # concurrency_limit
    expires: float | None = None  # expires_at


@dataclass
class FakeLimits:
    """A queue's limits, as its row holds them."""

    concurrency: int | None = None
    rate: int | None = None
    period: float = 1.0


@dataclass
class FakeSchedule:
    """A schedule as the fake stores it: an interval, its next run (None: nothing to run), the job it makes."""

    at: float | None
    interval: float
    updated: float
    task: str = "fake"
    args: list = field(default_factory=list)
    queue: str = "default"


class _Tables:
    """What FakeStores share, as dispatchers share a database."""

    def __init__(self):
        self.jobs = {}  # id -> FakeRow
        self.schedules = {}  # id -> FakeSchedule
        self.paused = set()
        self.rollups = {}  # (minute, queue, task) -> rollup.Tally, merged from every store
        self.limits = {}  # queue -> FakeLimits
        self.starts = []  # (queue, epoch): attempts started in rate-limited queues
        self.alive = set()  # worker ids registered and not retired (sql.liveness)
        self.leader = (None, 0.0)  # (worker id, until): who leads the maintenance (maintenance.leader)
        self.scheduled_ids = itertools.count(SCHEDULED_JOB_IDS)
        # Every method holds it: loop tests add jobs from the test thread
        # while the dispatcher runs on another.
        self.lock = threading.RLock()


class FakeStore:
    """``protocol.Store`` over dicts, with call counters for the loop tests."""

    transient_errors = (TransientError,)

    def __init__(self, clock, *, worker_id="fake", lease=30.0, tables=None, policy=None):
        self.clock = clock
        self.worker_id = worker_id
        self.lease = lease
        # When a rescued attempt runs again (the Django store's: the settings' policy).
        self.policy = policy or RetryPolicy(base=0.0, jitter=0.0)
        self._tables = tables or _Tables()
        self.jobs = self._tables.jobs
        self.execute = FakeExecutor()
        self.behaviours = self.execute.behaviours
        # This dispatcher's Worker row, as DjangoStore keeps it.
        self.worker_row = {"state": None, "queues": [], "slots": {}, "running": 0, "processed": 0, "failed": 0}
        self.fail_next = 0  # the next n calls raise TransientError
        self.fail_finish = 0  # the next n writes of outcomes raise TransientError (other calls work)
        self.claims = []  # (queues, limit, claimed ids) per claim
        self.limited_claims = []  # (queues, limit, claimed ids, full) per limited claim
        self.keyed_claims = []  # (queues, limit, claimed ids, held) per keyed claim
        self.freed = []  # the queues of each notify_freed
        self.claim_ids = []  # the ids asked for, per claim (None: by query)
        self.change_limits = []  # the limit of each change poll
        self.changed_rows_read = 0  # pending jobs the change polls returned
        self.finished = []  # every outcome given to finish, won or not
        self.released = []  # ids released
        self.materialized = []  # (schedule id, run time) per job made
        self.rollup_writes = []  # the `now` of each write_rollups

    def peer(self, worker_id):
        """Return another dispatcher's store over the same tables."""
        return FakeStore(self.clock, worker_id=worker_id, lease=self.lease, tables=self._tables, policy=self.policy)

    # -- test setup --------------------------------------------------------

    def add(self, job_id, at, *, sleep=0.0, raises=False, hold=None, **columns):
        """Insert a pending job (``columns`` are FakeRow's); ``sleep``/``raises``/``hold`` go to the executor."""
        with self._tables.lock:
            row = FakeRow(job_id, at, updated=self.clock.time(), **columns)
            self.jobs[job_id] = row
            self.execute.behave(job_id, sleep=sleep, raises=raises, hold=hold)
            return row

    def add_schedule(self, schedule_id, at, interval, **columns):
        """Add a schedule (``columns`` are FakeSchedule's: the job it makes)."""
        with self._tables.lock:
            self._tables.schedules[schedule_id] = FakeSchedule(at, interval, self.clock.time(), **columns)

    @property
    def schedules(self):
        return self._tables.schedules

    @property
    def paused(self):
        return self._tables.paused

    def set_limits(self, queue, *, concurrency=None, rate=None, period=1.0):
        """Give ``queue`` limits (both None: none)."""
        with self._tables.lock:
            if concurrency is None and rate is None:
                self._tables.limits.pop(queue, None)
            else:
                self._tables.limits[queue] = FakeLimits(concurrency, rate, period)

    def _maybe_fail(self):
        if self.fail_next:
            self.fail_next -= 1
            raise TransientError("database down")

    # -- this dispatcher's row ---------------------------------------------

    def register(self, *, queues, slots):
        with self._tables.lock:
            self._maybe_fail()
            self.worker_row.update(state="alive", queues=sorted(queues), slots=dict(slots))
            self._tables.alive.add(self.worker_id)

    def heartbeat(self, now, *, running, processed, failed):
        with self._tables.lock:
            self._maybe_fail()
            self.worker_row.update(state="alive", running=running, processed=processed, failed=failed)

    def unregister(self, *, processed, failed):
        with self._tables.lock:
            self._maybe_fail()
            self.worker_row.update(state="stopped", running=0, processed=processed, failed=failed)
            if self._tables.leader[0] == self.worker_id:
                self._tables.leader = (self.worker_id, self.clock.time())  # resigned
                self._leads = False

    @property
    def unregistered(self):
        return self.worker_row["state"] == "stopped"

    def reset(self):
        pass

    # -- reads -------------------------------------------------------------

    def load_window(self, queues, until, limit):
        with self._tables.lock:
            self._maybe_fail()
            planned = sorted((s.at, i) for i, s in self.schedules.items() if s.at is not None and s.at <= until)
            planned = [schedule_entry(i, at) for at, i in planned][: max(limit // 2, 1)]
            rows = sorted(
                (j for j in self.jobs.values() if j.status == Status.PENDING and j.queue in queues and j.at <= until),
                key=lambda j: (j.at, j.id),
            )[: limit - len(planned)]
            return planned + [Entry(j.id, j.at, j.priority, j.queue, j.key is not None) for j in rows]

    def changes(self, queues, since, limit=None):
        with self._tables.lock:
            self._maybe_fail()
            self.change_limits.append(limit)
            entries = [schedule_entry(i, s.at) for i, s in sorted(self.schedules.items()) if s.updated >= since]
            rows = [
                j
                for j in sorted(self.jobs.values(), key=lambda j: j.id)
                if j.status == Status.PENDING and j.queue in queues and j.updated >= since
            ]
            if limit is not None and len(rows) > limit:
                return None
            self.changed_rows_read += len(rows)
            return entries + [Entry(j.id, j.at, j.priority, j.queue, j.key is not None) for j in rows]

    def data_changed(self):
        self._maybe_fail()
        return True  # other processes cannot be seen: "unknown"

    def cancel_requests(self):
        with self._tables.lock:
            self._maybe_fail()
            return {
                j.id
                for j in self.jobs.values()
                if j.status == Status.RUNNING and j.worker == self.worker_id and j.cancel_requested
            }

    def paused_queues(self):
        with self._tables.lock:
            self._maybe_fail()
            return set(self._tables.paused)

    def limited_queues(self):
        with self._tables.lock:
            self._maybe_fail()
            return set(self._tables.limits)

    def any_due(self, queues, now):
        with self._tables.lock:
            self._maybe_fail()
            return any(
                j.status == Status.PENDING
                and j.queue in queues
                and j.at <= now
                and (j.expires is None or j.expires > now)
                for j in self.jobs.values()
            )

    # -- transitions -------------------------------------------------------

    def claim(self, queues, limit, now, ids=None, finished=(), in_flight=()):
        with self._tables.lock:
            self._maybe_fail()
            self.claim_ids.append(None if ids is None else list(ids))
            if finished:
                self._finish(finished, now)
            wanted = None if ids is None else set(ids)
            free = set(queues) - self._tables.paused - set(self._tables.limits)
            due = self._due(free, now, wanted, set(in_flight))[: max(limit, 0)]
            self._take(due, now)
            self.claims.append((set(queues), limit, [j.id for j in due]))
            return [self._claimed(row) for row in due]

    def _due(self, queues, now, wanted=None, in_flight=frozenset(), keyed=False):
        return sorted(
            (
                j
                for j in self.jobs.values()
                if j.status == Status.PENDING
                and j.queue in queues
                and j.at <= now
                and (wanted is None or j.id in wanted)
                and j.id not in in_flight
                and (j.key is not None) == keyed
                and (j.expires is None or j.expires > now)
            ),
            key=lambda j: (-j.priority, j.at, j.id),
        )

    def _take(self, rows, now):
        for row in rows:
            row.status = Status.RUNNING
            row.attempts += 1
            row.worker = self.worker_id
            row.lease_until = now + self.lease
            row.last_attempted_at = row.updated = now
            if row.started_at is None:
                row.started_at = now

    def claim_limited(self, queues, limit, now, finished=(), in_flight=()):
        """As the SQL: finish, count each limited queue's room, claim the best due jobs within it."""
        with self._tables.lock:
            self._maybe_fail()
            if finished:
                self._finish(finished, now)
            in_flight = set(in_flight)
            tables = self._tables
            open_queues = set(queues) - tables.paused
            tables.starts = [
                (q, t) for q, t in tables.starts if q not in tables.limits or t > now - tables.limits[q].period
            ]
            candidates = self._due(open_queues - set(tables.limits), now, in_flight=in_flight)[: max(limit, 0)]
            rooms = {}
            for queue in sorted(open_queues & set(tables.limits)):
                lim = tables.limits[queue]
                running = sum(1 for j in self.jobs.values() if j.status == Status.RUNNING and j.queue == queue)
                starts = [t for q, t in tables.starts if q == queue]
                by_c = None if lim.concurrency is None else lim.concurrency - running
                by_r = None if lim.rate is None else lim.rate - len(starts)
                rooms[queue] = (by_c, by_r, min(starts, default=None), lim)
                room = min(v for v in (by_c, by_r, limit) if v is not None)
                candidates += self._due({queue}, now, in_flight=in_flight)[: max(room, 0)]
            chosen = sorted(candidates, key=lambda j: (-j.priority, j.at, j.id))[: max(limit, 0)]
            self._take(chosen, now)
            full = {}
            for queue, (by_c, by_r, oldest, lim) in rooms.items():
                n = sum(1 for j in chosen if j.queue == queue)
                if lim.rate is not None:
                    tables.starts += [(queue, now)] * n
                if by_c is not None and by_c - n <= 0:
                    full[queue] = None
                elif by_r is not None and by_r - n <= 0:
                    full[queue] = (now if oldest is None else oldest) + lim.period
            self.limited_claims.append((set(queues), limit, [j.id for j in chosen], full))
            return [self._claimed(row) for row in chosen], full

    def claim_keyed(self, queues, limit, now, finished=(), in_flight=()):
        """As the SQL (``sql.keys``): the outcomes, keyed jobs within their keys' room, then jobs without a key by query."""
        with self._tables.lock:
            self._maybe_fail()
            if finished:
                self._finish(finished, now)
            free = set(queues) - self._tables.paused
            in_flight = set(in_flight)
            room = {
                q: lim.concurrency - sum(1 for j in self.jobs.values() if j.status == Status.RUNNING and j.queue == q)
                for q, lim in self._tables.limits.items()
                if lim.concurrency is not None
            }
            running = {}
            for j in self.jobs.values():
                if j.status == Status.RUNNING and j.key is not None:
                    running[j.key] = running.get(j.key, 0) + 1
            chosen, held = [], False
            for j in self._due(free, now, in_flight=in_flight, keyed=True):
                if running.get(j.key, 0) >= j.key_limit or room.get(j.queue, 1) <= 0:
                    held = True
                elif len(chosen) < limit:
                    chosen.append(j)
                    running[j.key] = running.get(j.key, 0) + 1
                    if j.queue in room:
                        room[j.queue] -= 1
            unlimited = free - set(self._tables.limits)
            chosen += self._due(unlimited, now, in_flight=in_flight)[: max(limit - len(chosen), 0)]
            chosen.sort(key=lambda j: (-j.priority, j.at, j.id))
            self._take(chosen, now)
            self.keyed_claims.append((set(queues), limit, [j.id for j in chosen], held))
            return [self._claimed(row) for row in chosen], held

    def notify_freed(self, queues):
        self._maybe_fail()
        self.freed.append(set(queues))

    def _claimed(self, row):
        return ClaimedJob(
            id=row.id,
            task=row.task,
            args=list(row.args),
            kwargs=dict(row.kwargs),
            queue=row.queue,
            priority=row.priority,
            execute_at=row.at,
            attempt=row.attempts,
            max_attempts=row.max_attempts,
            timeout=row.timeout,
            cancel_requested=row.cancel_requested,
            worker=row.worker,
            last_attempted_at=to_datetime(row.last_attempted_at),
            started_at=to_datetime(row.started_at),
            snoozes=row.snoozes,
        )

    def finish(self, outcomes, now):
        with self._tables.lock:
            self._maybe_fail()
            return self._finish(outcomes, now)

    def _finish(self, outcomes, now):
        """Compare-and-set each outcome on its attempt (status running, worker, attempts)."""
        if self.fail_finish:
            self.fail_finish -= 1
            raise TransientError("outcomes not written")
        won = set()
        for o in outcomes:
            if o.status not in Status.OUTCOMES:
                raise ValueError(f"not an outcome status: {o.status!r}")
            self.finished.append(o)
            row = self.jobs.get(o.job_id)
            if row is None or row.status != Status.RUNNING or row.worker != o.worker or row.attempts != o.attempt:
                continue
            row.status = attempt_end(o.status, row.cancel_requested)
            if o.status == Status.SUCCEEDED:
                row.result_json = o.result_json
            if o.error is not None:
                row.errors.append(o.error)
            if o.retry_at is not None and row.status == Status.PENDING:
                row.at = o.retry_at.timestamp()
            if o.snoozed:
                row.attempts -= 1
                row.snoozes += 1
            row.lease_until = None
            row.updated = now
            won.add(o.job_id)
        return won

    def renew(self, now, ids=None):
        with self._tables.lock:
            self._maybe_fail()
            mine = [
                j
                for j in self.jobs.values()
                if j.status == Status.RUNNING and j.worker == self.worker_id and (ids is None or j.id in ids)
            ]
            for row in mine:
                row.lease_until = now + self.lease
            return {j.id for j in mine if j.cancel_requested}

    def rescue(self, now):
        """Take back any dispatcher's attempts whose lease expired, as the SQL does."""
        with self._tables.lock:
            self._maybe_fail()
            expired = sorted(
                (
                    j
                    for j in self.jobs.values()
                    if j.status == Status.RUNNING and j.lease_until is not None and j.lease_until < now
                ),
                key=lambda j: j.lease_until,
            )[:500]
            for row in expired:
                row.errors.append(
                    {
                        "attempt": row.attempts,
                        "time": to_datetime(now).isoformat(),
                        "worker": row.worker,
                        "exception_class": LEASE_EXPIRED_CLASS,
                        "message": LEASE_EXPIRED_MESSAGE,
                        "traceback": "",
                    }
                )
                ending = Status.PENDING if row.attempts < row.max_attempts else Status.FAILED
                row.status = attempt_end(ending, row.cancel_requested)
                if row.status == Status.PENDING:
                    row.at = self.policy.retry_at(row.task, row.attempts, to_datetime(now)).timestamp()
                row.lease_until = None
                row.updated = now
            return len(expired)

    def expire(self, now):
        with self._tables.lock:
            self._maybe_fail()
            expired = [
                j
                for j in self.jobs.values()
                if j.status in (Status.PENDING, Status.WAITING) and j.expires is not None and j.expires <= now
            ]
            for row in expired:
                row.status, row.updated = Status.CANCELLED, now
            return len(expired)

    def release(self, jobs, now):
        """Hand attempts back: they stay running, without a lease, until this store retires (as the SQL does)."""
        with self._tables.lock:
            self._maybe_fail()
            won = []
            for job in jobs:
                row = self.jobs.get(job.id)
                if (
                    row
                    and row.status == Status.RUNNING
                    and row.worker == self.worker_id
                    and row.attempts == job.attempt
                ):
                    row.errors.append(
                        {
                            "attempt": row.attempts,
                            "time": to_datetime(now).isoformat(),
                            "worker": row.worker,
                            "exception_class": RELEASED_CLASS,
                            "message": RELEASED_MESSAGE,
                            "traceback": "",
                        }
                    )
                    row.lease_until = None
                    row.updated = now
                    won.append(job.id)
            self.released.extend(won)
            return set(won)

    def take_back(self, now):
        with self._tables.lock:
            self._maybe_fail()
            handed = [j for j in self.jobs.values() if j.status == Status.RUNNING and j.lease_until is None]
            taken = [j for j in handed if j.worker not in self._tables.alive]
            for row in taken:
                row.status = attempt_end(Status.PENDING, row.cancel_requested)
                row.attempts -= 1  # the interrupted attempt does not count
                row.updated = now
            return len(taken), len(handed) - len(taken)

    def retire(self):
        with self._tables.lock:
            self._tables.alive.discard(self.worker_id)

    def materialize(self, now, ids=()):
        """Turn due schedules into jobs (one per run), as the Django store does."""
        with self._tables.lock:
            self._maybe_fail()
            out = []
            for schedule_id, s in sorted(self.schedules.items()):
                due = s.at is not None and s.at <= now
                if due:
                    self.add(next(self._tables.scheduled_ids), s.at, task=s.task, args=list(s.args), queue=s.queue)
                    self.materialized.append((schedule_id, s.at))
                    s.at += s.interval * (int((now - s.at) // s.interval) + 1)
                    s.updated = now
                if due or schedule_id in ids:
                    out.append(schedule_entry(schedule_id, s.at))
            return out

    def write_rollups(self, tallies, now, *, samples=True):
        """Merge tallies into the shared table, as the database's upsert-add does."""
        with self._tables.lock:
            self._maybe_fail()
            self.rollup_writes.append(now)
            for key, tally in tallies.items():
                mine = self._tables.rollups.get(key)
                if mine is None:
                    self._tables.rollups[key] = tally
                else:
                    mine.merge(tally)

    @property
    def rollups(self):
        return self._tables.rollups

    def maintain(self, now, *, housekeeping_interval):
        """Lead (one store of the shared tables at a time) and rescue and expire, as ``maintenance`` does."""
        with self._tables.lock:
            self._maybe_fail()
            holder, until = self._tables.leader
            free = holder in (None, self.worker_id) or until < now or holder not in self._tables.alive
            self._leads = free
            if not free:
                return now + min(self.lease / 3, 2.0)
            self._tables.leader = (self.worker_id, now + self.lease)
            self.rescue(now)
            self.expire(now)
            leases = [j.lease_until for j in self.jobs.values() if j.status == Status.RUNNING and j.lease_until]
            later = now + self.lease / 3
            return min(later, max(min(leases) + 0.5, now + 0.5)) if leases else later

    @property
    def leads(self):
        """Whether this store led at its last ``maintain``."""
        return getattr(self, "_leads", False)
