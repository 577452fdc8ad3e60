"""A bounded pool of worker threads, in slot groups, with per-job deadlines.

A slot is the right to run one attempt at a time; a group has as many
worker threads (``WorkerThread``) as slots in use. (A "worker" row in the
database is something else: one dispatcher process, see ``store.py``.)

Hand-off: the loop puts the attempts it claimed for a group on the group's
ready queue and wakes one sleeping thread. A thread just woken (or just
started) that takes an attempt wakes the next sleeper if more are waiting,
then runs it; when it is done it takes the next ready attempt before it
sleeps, without waking anyone: the chain of wake-ups that began with the
hand-off is still under way while attempts wait, so waking another thread
per attempt taken would only add thread switches. A batch of short jobs thus
runs mostly on the threads that are already awake, while a batch of slow
jobs still gets one thread each, a wake-up apart. Only the loop puts
attempts on the queue, and never more than its free slots (invariant 3), so
an attempt waits there only until a thread of its group looks.

The loop thread owns the records (``_running`` and the counts); worker
threads take from the ready queues and mark what they start under
``_lock``, put results on ``_done``, then call ``wake`` so the loop refills
the slot at once. Timeouts are enforced here, not with signals (seed 004):
an overdue job's thread is abandoned (its late result dropped) and a fresh
thread takes its slot, up to ``max_abandoned`` lingering threads; an
overdue attempt no thread has taken yet is failed and never starts. An
executor may enforce some attempts' timeouts itself (a worker process is
killed at its deadline, counted from the task's own start): it says which
with an ``owns_deadline(job)`` method, and the pool leaves those alone.

An attempt the pool's ``lane`` (``asyncio_lane.AsyncLane``) takes, an
``async def`` task of an ``async`` queue, takes a slot but no thread: it
runs on the lane's event loop, and its end comes back through ``_done`` as
a thread's does. Its timeout and its cancel cancel its asyncio task; a
timed-out one keeps its slot until its coroutine has returned.
"""

import collections
import itertools
import logging
import queue
import threading
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

_WAKE = object()  # a sleeping thread's wake-up: look at the ready queue
_EXIT = object()  # ... or exit


class WorkerThread:
    """One thread of the pool; runs its group's ready attempts until told to exit."""

    def __init__(self, pool, group, number):
        self.group = group
        self.inbox = queue.SimpleQueue()  # _WAKE or _EXIT, while it sleeps
        self.abandoned = False  # set by the loop thread: exit once the overdue job returns
        self.os_thread = threading.Thread(
            target=pool._work, args=(self,), name=f"{pool.name}-{group}-{number}", daemon=True
        )
        self.os_thread.start()


@dataclass(slots=True)
class _Running:
    token: int
    job: object
    group: str
    deadline: float | None  # monotonic, counted from the hand-over; None when the executor owns it
    deadline_epoch: float | None  # what the executor is told
    cancel_event: threading.Event = field(default_factory=threading.Event)
    timed_out: bool = False  # failed already, thread kept: its slot frees when it returns
    # Under the pool's lock: the thread that took it (None while it is ready),
    # and whether it was dropped before any thread took it.
    thread: WorkerThread | None = None
    dropped: bool = False
    on_lane: bool = False  # runs on the asyncio lane, not on a thread


class WorkerPool:
    def __init__(self, groups, execute, *, wake, clock, max_abandoned=8, name="scheduler", refuse=None, lane=None):
        self.groups = dict(groups)  # group -> slots
        self.name = name
        self._execute = execute  # (job, cancel_event, deadline_epoch) -> outcome
        # (job, epoch now) -> an Outcome instead of starting it (its lease ran out), or None: start it.
        self._refuse = refuse
        # job -> True when the executor enforces that job's timeout itself (None: it never does).
        self._owns_deadline = getattr(execute, "owns_deadline", None)
        self._wake = wake
        self._clock = clock
        # Runs the attempts it ``takes`` on its event loop (None: every attempt on a thread); an executor may carry it.
        self._lane = lane if lane is not None else getattr(execute, "lane", None)
        self._on_lane = dict.fromkeys(self.groups, 0)  # group -> its _running on the lane; loop thread only
        self.max_abandoned = max_abandoned
        self._done = queue.SimpleQueue()  # shared: (token, outcome, error)
        self._lock = threading.Lock()  # guards _ready, _sleeping, _Running.thread/dropped
        self._ready = {g: collections.deque() for g in self.groups}  # group -> _Running not yet taken
        self._sleeping = {g: [] for g in self.groups}  # group -> WorkerThreads waiting on their inbox
        self._threads = {g: set() for g in self.groups}  # live, not abandoned; loop thread only
        self._running = {}  # token -> _Running; loop thread only
        self._busy = dict.fromkeys(self.groups, 0)  # group -> len of its _running; loop thread only
        self._by_job = {}  # job id -> token; loop thread only
        self._abandoned = {}  # token -> (WorkerThread, job id) still running a timed-out job; loop thread only
        self._returned = []  # ids of timed-out jobs whose threads returned since returned(); loop thread only
        self._tokens = itertools.count(1)
        self._numbers = itertools.count(1)
        self._closed = False  # under _lock: close() was called

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
        self.submit_many(group, (job,))

    def submit_many(self, group, jobs):
        """Start ``jobs``, in this order, on free slots of ``group`` (one thread wake-up)."""
        jobs = list(jobs)
        if len(jobs) > self.free(group):
            raise RuntimeError(f"no free slot in group {group!r}")
        if not jobs:
            return
        now = self._clock.monotonic()
        epoch = self._clock.time()
        records = []
        owns_deadline = self._owns_deadline
        for job in jobs:
            token = next(self._tokens)
            timeout = getattr(job, "timeout", None)
            if timeout and owns_deadline is not None and owns_deadline(job):
                timeout = None  # neither expired here nor passed on: the executor counts it
            record = _Running(
                token, job, group, now + timeout if timeout else None, epoch + timeout if timeout else None
            )
            if getattr(job, "cancel_requested", False):
                record.cancel_event.set()
            record.on_lane = self._lane is not None and self._lane.takes(job)
            self._running[token] = record
            self._by_job[job.id] = token
            records.append(record)
        self._busy[group] += len(records)
        if self._lane is not None and any(record.on_lane for record in records):
            records = self._to_lane(group, records)
            if not records:
                return
        threads = self._threads[group]
        # A slot per busy attempt; threads are started when first needed
        # (and again when a timed-out one was abandoned).
        for _ in range(self._busy[group] - self._on_lane[group] - len(threads)):
            threads.add(WorkerThread(self, group, next(self._numbers)))
        with self._lock:
            self._ready[group].extend(records)
            sleeping = self._sleeping[group]
            if sleeping:
                sleeping.pop().inbox.put(_WAKE)

    def _to_lane(self, group, records):
        """Start the lane's records on it; return the others (for the threads)."""
        for record in records:
            if record.on_lane:
                self._on_lane[group] += 1
                self._lane.start(
                    record.token,
                    record.job,
                    record.cancel_event,
                    record.deadline_epoch,
                    refuse=self._refuse,
                    done=self._lane_done,
                )
        return [record for record in records if not record.on_lane]

    def _lane_done(self, token, outcome, error):
        """The lane's thread: an attempt on the lane ended."""
        self._done.put((token, outcome, error))
        self._wake()

    def _take(self, thread, woken):
        """Return the next ready attempt of ``thread``'s group, None after putting it to sleep, or _EXIT.

        Worker threads only. When ``woken`` (the thread comes from sleep or
        was just started), taking one wakes a sleeping thread if more wait.
        """
        group = thread.group
        with self._lock:
            ready = self._ready[group]
            if thread.abandoned or self._closed:
                if ready and self._sleeping[group]:  # it may have been woken for these
                    self._sleeping[group].pop().inbox.put(_WAKE)
                return _EXIT
            while ready:
                record = ready.popleft()
                if record.dropped:
                    continue
                record.thread = thread
                if ready and woken:
                    sleeping = self._sleeping[group]
                    if sleeping:
                        sleeping.pop().inbox.put(_WAKE)
                return record
            self._sleeping[group].append(thread)
            return None

    def _work(self, thread):
        """The body of a worker thread."""
        woken = True
        while True:
            record = self._take(thread, woken)
            if record is None:
                if thread.inbox.get() is _EXIT:
                    return
                woken = True
                continue
            if record is _EXIT:
                return
            woken = False
            job = record.job
            try:
                refused = self._refuse(job, self._clock.time()) if self._refuse is not None else None
                if refused is not None:
                    outcome, error = refused, None
                else:
                    outcome, error = self._execute(job, record.cancel_event, record.deadline_epoch), None
            except BaseException as exc:  # the executor should not raise; never lose a slot
                logger.exception("executor raised for job %s", getattr(job, "id", "?"))
                outcome, error = None, exc
            self._done.put((record.token, outcome, error))
            self._wake()
            if thread.abandoned:
                return

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
            if (abandoned := self._abandoned.pop(token, None)) is not None:
                logger.info("dropped the late result of an abandoned attempt (token %s)", token)
                self._returned.append(abandoned[1])
                continue
            record = self._running.pop(token, None)
            if record is None:
                continue
            self._busy[record.group] -= 1
            if record.on_lane:
                self._on_lane[record.group] -= 1
            self._by_job.pop(record.job.id, None)
            if record.timed_out:
                self._returned.append(record.job.id)
            else:
                # (A timed-out one failed at its deadline already; its slot frees now.)
                finished.append((record.job, outcome, error))

    def expire(self):
        """Return jobs whose deadline passed; give their slots to fresh threads.

        When ``max_abandoned`` threads already linger, the slot stays taken
        until the overdue thread returns (the job is failed now all the same).
        An overdue attempt no thread has taken yet is dropped: it never starts.
        """
        now = self._clock.monotonic()
        expired = []
        for token, record in list(self._running.items()):
            if record.timed_out or record.deadline is None or record.deadline > now:
                continue
            record.cancel_event.set()  # a cooperative task can still stop early
            expired.append(record.job)
            if record.on_lane:
                # Its coroutine is cancelled; its slot frees when it has returned (it may swallow the cancel).
                record.timed_out = True
                self._lane.cancel(token)
                continue
            with self._lock:
                thread = record.thread
                if thread is None:
                    record.dropped = True
                elif len(self._abandoned) < self.max_abandoned:
                    thread.abandoned = True  # it exits once the overdue job returns
                    sleeping = self._sleeping[record.group]
                    if thread in sleeping:  # it returned already; its result waits in _done
                        sleeping.remove(thread)
                        thread.inbox.put(_EXIT)
            if thread is not None and not thread.abandoned:
                record.timed_out = True
                logger.warning(
                    "job %s timed out but %d abandoned threads already linger; its slot stays taken until it returns",
                    record.job.id,
                    len(self._abandoned),
                )
                continue
            del self._running[token]
            self._busy[record.group] -= 1
            self._by_job.pop(record.job.id, None)
            if thread is not None:
                self._threads[record.group].discard(thread)
                self._abandoned[token] = (thread, record.job.id)
        return expired

    def returned(self):
        """Return the ids of timed-out jobs whose threads returned since the last call (their late results dropped)."""
        returned, self._returned = self._returned, []
        return returned

    def runs_on(self, job_id):
        """Return whether a thread still runs the timed-out attempt of ``job_id`` (abandoned, or keeping its slot)."""
        token = self._by_job.get(job_id)
        if token is not None:
            return self._running[token].timed_out
        return any(jid == job_id for _, jid in self._abandoned.values())

    def next_deadline(self):
        deadlines = [r.deadline for r in self._running.values() if r.deadline is not None and not r.timed_out]
        return min(deadlines) if deadlines else None

    def request_cancel(self, job_ids):
        """Set the cancel flag of running jobs among ``job_ids``; return how many."""
        count = 0
        for job_id in job_ids:
            token = self._by_job.get(job_id)
            if token is not None:
                record = self._running[token]
                record.cancel_event.set()
                if record.on_lane:
                    self._lane.cancel(token)
                count += 1
        return count

    def in_flight(self):
        """Return the ids of the jobs a thread of this pool may still be running.

        The attempts in flight and those that timed out while their thread
        runs on: a claim must not take any of them (invariant 14).
        """
        if not self._abandoned:
            return self._by_job.keys()
        return self._by_job.keys() | {job_id for _, job_id in self._abandoned.values()}

    def running_jobs(self):
        """Return the jobs whose attempts are in flight (timed-out ones excluded)."""
        return [r.job for r in self._running.values() if not r.timed_out]

    def live_threads(self):
        """Return the OS threads of this pool that are still alive (running an attempt, or about to exit)."""
        threads = [t for group in self._threads.values() for t in group]
        threads += [t for t, _ in self._abandoned.values()]
        alive = [t.os_thread for t in threads if t.os_thread.is_alive()]
        lane = self._lane.live_thread() if self._lane is not None else None
        return alive + [lane] if lane is not None else alive

    def close(self):
        """Start nothing more: attempts no thread has taken yet never start (they stay in running_jobs)."""
        if self._lane is not None:
            self._lane.close_starts()
        with self._lock:
            self._closed = True
            for ready in self._ready.values():
                for record in ready:
                    record.dropped = True
                ready.clear()

    def shutdown(self):
        """Close, and tell every thread to exit once its current job returns (threads are daemons)."""
        self.close()
        with self._lock:
            for sleeping in self._sleeping.values():
                for thread in sleeping:
                    thread.inbox.put(_EXIT)
                sleeping.clear()
