"""A bounded pool of worker threads, in slot groups, with per-job deadlines.

A slot is the right to run one attempt at a time; each busy slot has a
worker thread (``WorkerThread``) of this process. (A "worker" row in the
database is something else: one dispatcher process, see ``store.py``.)

The loop thread owns every attribute except ``_done``; worker threads only
read their inbox and put results on ``_done``, then call ``wake`` so the loop
refills the slot at once. Timeouts are enforced here, not with signals
(seed 004): an overdue job's thread is abandoned (its late result dropped)
and a fresh thread takes its slot, up to ``max_abandoned`` lingering threads.
"""

import itertools
import logging
import queue
import threading
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


class WorkerThread:
    """One thread of the pool; runs the jobs put in its inbox until it gets None."""

    def __init__(self, pool, group, number):
        self.group = group
        self.inbox = queue.SimpleQueue()
        self.abandoned = False  # loop thread only
        self.os_thread = threading.Thread(
            target=pool._work, args=(self,), name=f"{pool.name}-{group}-{number}", daemon=True
        )
        self.os_thread.start()


@dataclass(slots=True)
class _Running:
    job: object
    group: str
    thread: WorkerThread
    started: float  # monotonic
    deadline: float | None  # monotonic
    cancel_event: threading.Event = field(default_factory=threading.Event)
    timed_out: bool = False  # failed already, thread kept: its slot frees when it returns


class WorkerPool:
    def __init__(self, groups, execute, *, wake, clock, max_abandoned=8, name="scheduler"):
        self.groups = dict(groups)  # group -> slots
        self.name = name
        self._execute = execute  # (job, cancel_event, deadline_epoch) -> outcome
        self._wake = wake
        self._clock = clock
        self.max_abandoned = max_abandoned
        self._done = queue.SimpleQueue()  # shared: (token, outcome, error)
        self._idle = {g: [] for g in self.groups}  # group -> idle WorkerThreads; loop thread only
        self._running = {}  # token -> _Running; loop thread only
        self._busy = dict.fromkeys(self.groups, 0)  # group -> len of its _running; loop thread only
        self._by_job = {}  # job id -> token; loop thread only
        self._abandoned = {}  # token -> WorkerThread still running a timed-out job; loop thread only
        self._tokens = itertools.count(1)
        self._numbers = itertools.count(1)

    # -- capacity ---------------------------------------------------------

    def busy(self, group=None):
        return len(self._running) if group is None else self._busy[group]

    def free(self, group):
        return self.groups[group] - self.busy(group)

    @property
    def abandoned_count(self):
        return len(self._abandoned)

    # -- work -------------------------------------------------------------

    def submit(self, group, job):
        """Start ``job`` on a free slot of ``group``."""
        if self.free(group) <= 0:
            raise RuntimeError(f"no free slot in group {group!r}")
        idle = self._idle[group]
        thread = idle.pop() if idle else WorkerThread(self, group, next(self._numbers))
        token = next(self._tokens)
        now = self._clock.monotonic()
        timeout = getattr(job, "timeout", None)
        deadline = now + timeout if timeout else None
        deadline_epoch = self._clock.time() + timeout if timeout else None
        record = _Running(job, group, thread, now, deadline)
        if getattr(job, "cancel_requested", False):
            record.cancel_event.set()
        self._running[token] = record
        self._busy[group] += 1
        self._by_job[job.id] = token
        thread.inbox.put((token, job, record.cancel_event, deadline_epoch))

    def _work(self, thread):
        """The body of a worker thread."""
        while True:
            item = thread.inbox.get()
            if item is None:
                return
            token, job, cancel_event, deadline = item
            try:
                outcome, error = self._execute(job, cancel_event, deadline), None
            except BaseException as exc:  # the executor should not raise; never lose a slot
                logger.exception("executor raised for job %s", getattr(job, "id", "?"))
                outcome, error = None, exc
            self._done.put((token, outcome, error))
            self._wake()

    def collect(self):
        """Return ``[(job, outcome, error)]`` for attempts that ended; free their slots.

        Results of attempts that timed out are dropped.
        """
        finished = []
        while True:
            try:
                token, outcome, error = self._done.get_nowait()
            except queue.Empty:
                return finished
            if self._abandoned.pop(token, None) is not None:
                logger.info("dropped the late result of an abandoned attempt (token %s)", token)
                continue
            record = self._running.pop(token, None)
            if record is None:
                continue
            self._busy[record.group] -= 1
            self._by_job.pop(record.job.id, None)
            if record.timed_out:
                # Failed at its deadline already; the thread is back, the slot frees now.
                self._idle[record.group].append(record.thread)
                continue
            self._idle[record.group].append(record.thread)
            finished.append((record.job, outcome, error))

    def expire(self):
        """Return jobs whose deadline passed; give their slots to fresh threads.

        When ``max_abandoned`` threads already linger, the slot stays taken
        until the overdue thread returns (the job is failed now all the same).
        """
        now = self._clock.monotonic()
        expired = []
        for token, record in list(self._running.items()):
            if record.timed_out or record.deadline is None or record.deadline > now:
                continue
            record.cancel_event.set()  # a cooperative task can still stop early
            expired.append(record.job)
            if len(self._abandoned) < self.max_abandoned:
                del self._running[token]
                self._busy[record.group] -= 1
                self._by_job.pop(record.job.id, None)
                record.thread.abandoned = True
                record.thread.inbox.put(None)  # exit after the overdue job returns
                self._abandoned[token] = record.thread
            else:
                record.timed_out = True
                logger.warning(
                    "job %s timed out but %d abandoned threads already linger; "
                    "its slot stays taken until it returns",
                    record.job.id,
                    len(self._abandoned),
                )
        return expired

    def next_deadline(self):
        deadlines = [
            r.deadline for r in self._running.values() if r.deadline is not None and not r.timed_out
        ]
        return min(deadlines) if deadlines else None

    def request_cancel(self, job_ids):
        """Set the cancel flag of running jobs among ``job_ids``; return how many."""
        count = 0
        for job_id in job_ids:
            token = self._by_job.get(job_id)
            if token is not None:
                self._running[token].cancel_event.set()
                count += 1
        return count

    def running_jobs(self):
        """Return the jobs whose attempts are in flight (timed-out ones excluded)."""
        return [r.job for r in self._running.values() if not r.timed_out]

    def shutdown(self):
        """Tell every thread to exit once its current job returns (threads are daemons)."""
        threads = [t for idle in self._idle.values() for t in idle]
        threads += [r.thread for r in self._running.values()]
        for thread in threads:
            thread.inbox.put(None)
        for idle in self._idle.values():
            idle.clear()
