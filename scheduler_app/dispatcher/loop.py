"""The dispatcher loop: one ``tick(now)`` per wake-up, and ``run()`` around it.

Only this thread talks to the store. It sleeps on one event, for as long as
``tick`` says: until the earliest waiting job is due, the next timer (change
poll, full reload, heartbeat, pause flags, housekeeping), the nearest job
deadline, or a wake-up (a notification, a finished job, ``stop()``).

Nothing here imports Django: the store, the executor and the clock are
injected, so tests drive ``tick`` with a fake clock and an in-memory store.
"""

import collections
import logging
import threading
import time

from .clock import SystemClock
from .gate import Gate
from .policy import RetryPolicy
from .pool import WorkerPool
from .rollup import Rollups, summary
from .timeline import SCHEDULES, Timeline
from .types import Status
from .window import Window

logger = logging.getLogger(__name__)


class Dispatcher:
    # Seconds to claim by query after a claim by id came back short.
    CONTENTION_BACKOFF = 1.0

    def __init__(
        self,
        store,
        groups,
        execute,
        *,
        clock=None,
        policy=None,
        horizon=300.0,
        cap=20_000,
        poll_interval=1.0,
        full_sync_interval=30.0,
        sync_overlap=2.0,
        lease=30.0,
        grace=30.0,
        burst=False,
        max_jobs=None,
        max_abandoned=8,
        housekeeping_interval=60.0,
        pause_interval=1.0,
        change_check_interval=None,
        rollup_interval=None,
    ):
        """``groups`` maps a slot-group name to ``(queues, slots)``.

        ``store`` is a ``protocol.Store``; ``execute(job, cancel_event,
        deadline)`` runs one attempt on a worker thread and returns its
        Outcome; ``policy`` turns the endings the loop sees itself (a
        timeout, an executor that raised) into Outcomes.
        """
        self.store = store
        self.clock = clock or SystemClock()
        self.policy = policy or RetryPolicy()
        self.groups = {name: (frozenset(qs), int(slots)) for name, (qs, slots) in groups.items()}
        self.queue_group = {q: name for name, (qs, _) in self.groups.items() for q in qs}
        self.queues = frozenset(self.queue_group)
        self.lease = lease
        self.grace = grace
        self.burst = burst
        self.max_jobs = max_jobs
        self.housekeeping_interval = housekeeping_interval
        self.pause_interval = pause_interval
        # Where other processes cannot notify (SQLite), ask the store this
        # often whether anyone committed since; a yes brings the poll forward.
        self.change_check_interval = change_check_interval
        # Per-minute tallies of claims and outcomes, written this often
        # (None or 0: not kept). Loop thread only.
        self.rollup_interval = rollup_interval
        self.rollups = Rollups() if rollup_interval else None

        self.timeline = Timeline(self._group_of, cap)  # loop thread only
        self.window = Window(  # loop thread only
            self.timeline,
            self.queues,
            horizon=horizon,
            poll_interval=poll_interval,
            full_sync_interval=full_sync_interval,
            sync_overlap=sync_overlap,
        )
        self.pool = WorkerPool(
            {name: slots for name, (_, slots) in self.groups.items()},
            execute,
            wake=self.wake,
            clock=self.clock,
            max_abandoned=max_abandoned,
        )
        # Limited queues: which are full, until when (the claim enforces the limits).
        self.gate = Gate(retry_interval=poll_interval)  # loop thread only
        self._event = threading.Event()  # any thread sets it to wake the loop
        self._inbox = collections.deque()  # any thread appends payloads; loop pops
        self._stopping = False  # any thread sets it through stop()
        # Loop thread only, below.
        self._outcomes = []  # written by the next finish(), kept across DB errors
        self._freed = set()  # limited queues of those outcomes: told to other dispatchers once written
        self._stop_deadline = None
        self._due_heartbeat = 0.0
        self._due_paused = 0.0
        self._due_housekeeping = 0.0
        self._due_change_check = 0.0
        self._due_rollup = None  # the first write comes one interval after the first tick
        self._last_rollup = None  # when the last write happened (the summary line's span)
        self._db_retry_at = 0.0
        self._db_backoff = 0.0
        self._need_paused = False
        # Until then, claim by query: another dispatcher was seen taking the
        # same due jobs, so claiming the window's ids would mostly miss.
        self._contended_until = 0.0
        self.paused = frozenset()
        self.on_exit = []  # callables run when run() ends (e.g. stop worker processes)
        self.process_queues = frozenset()  # queues whose jobs run in worker processes (wiring sets it)
        self.claimed_total = 0
        self.processed = 0
        self.failed = 0
        self.finished = False

    def _group_of(self, queue):
        """Return the slot group of ``queue``; schedules have a pseudo-group without slots."""
        if queue == SCHEDULES:
            return SCHEDULES
        return self.queue_group.get(queue)

    @property
    def horizon(self):
        return self.window.horizon

    @property
    def poll_interval(self):
        return self.window.poll_interval

    # -- called from any thread -------------------------------------------

    def wake(self):
        self._event.set()

    def listen_with(self, waiter):
        """Sleep on ``waiter`` from now on (``waiter.Waiter``: it also reads the LISTEN socket); return the old one."""
        if self._event.is_set():
            waiter.set()
        previous, self._event = self._event, waiter
        return previous

    def poll_wakeups(self):
        """Read notifications that arrived on the waiter's socket, without sleeping."""
        poll = getattr(self._event, "poll_source", None)
        if poll is not None:
            poll()

    def notify(self, message):
        """Accept a ``WakeUp`` (from a NOTIFY or the in-process signal)."""
        self._inbox.append(message)
        self._event.set()

    def stop(self):
        """Begin a graceful stop: claim nothing more, let running jobs finish. Idempotent."""
        self._stopping = True
        self._event.set()

    @property
    def stopping(self):
        return self._stopping

    # -- the loop ------------------------------------------------------------

    def run(self):
        """Run until stopped (or, in burst mode, until idle); return the exit code."""
        self.store.register(
            queues=self.queues, slots={name: slots for name, (_, slots) in self.groups.items()}
        )
        try:
            while not self.finished:
                self._event.clear()
                wait = self.tick(self.clock.time())
                if self.finished:
                    break
                if wait > 0:
                    self._event.wait(wait)
                    # Yield the GIL once: worker threads that finished at the same
                    # moment report now, so one round trip records (and
                    # refills) several slots instead of one.
                    time.sleep(0)
                else:
                    self.poll_wakeups()  # no sleep, but what arrived is read
        finally:
            self.pool.shutdown()
            for close in self.on_exit:
                close()
            try:
                if self.rollups is not None:
                    self._write_rollups(self.clock.time())
            except self.store.transient_errors:
                logger.warning("could not write the last rollups (database unavailable)")
            try:
                self.store.unregister(processed=self.processed, failed=self.failed)
            except self.store.transient_errors:
                logger.warning("could not mark this dispatcher stopped (database unavailable)")
        return 0

    def tick(self, now):
        """Do one pass at time ``now``; return how many seconds to wait."""
        if now < self._db_retry_at:
            return self._db_retry_at - now
        try:
            self._tick(now)
        except self.store.transient_errors as exc:
            self._back_off(now)
            logger.warning(
                "database unavailable (%s); retrying in %.2fs", exc, self._db_backoff,
                extra={"action": "db_error"},
            )
            return self._db_backoff
        except Exception:
            # A bug, or a row nobody foresaw: never a silent exit. The
            # outcomes collected so far are kept and written next time.
            self._back_off(now)
            logger.exception(
                "unexpected error in the dispatcher loop; retrying in %.2fs", self._db_backoff,
                extra={"action": "loop_error"},
            )
            return self._db_backoff
        self._db_backoff = 0.0
        # Measure the wait from the end of the tick, not its start: a tick
        # that took 3 ms must not make the next wake-up 3 ms late.
        return self._wait(self.clock.time())

    def _back_off(self, now):
        self._db_backoff = min(max(self._db_backoff * 2, 0.25), 10.0)
        self._db_retry_at = now + self._db_backoff
        self.store.reset()

    def _tick(self, now):
        self._drain_inbox()
        self._collect(now)
        if self.change_check_interval and now >= self._due_change_check:
            if self.store.data_changed():
                self.window.need_poll = True
                # Another process committed: perhaps a finish in a full queue (no NOTIFY here).
                self.gate.free(self.gate.limited, only_concurrency=True)
                if self.pool.busy():
                    # Where no NOTIFY carries a cancel (SQLite), the same
                    # cheap check brings it to the running task at once.
                    self.pool.request_cancel(self.store.cancel_requests())
            self._due_change_check = now + self.change_check_interval
        self.window.sync(self.store, now)
        if now >= self._due_heartbeat:
            self._heartbeat(now)
        if self._need_paused or now >= self._due_paused:
            self.paused = frozenset(self.store.paused_queues())
            self.gate.update(self.store.limited_queues())
            self._need_paused = False
            self._due_paused = now + self.pause_interval
        if now >= self._due_housekeeping:
            self.store.housekeeping(now)
            self._due_housekeeping = now + self.housekeeping_interval
        if self.rollups is not None:
            if self._due_rollup is None:
                self._due_rollup = now + self.rollup_interval
            elif now >= self._due_rollup:
                self._write_rollups(now)
        if self._stopping:
            self._flush(now)
            self._stop_step(now)
            return
        # The first claim of the tick also records the outcomes collected
        # above (one round trip on PostgreSQL); flush them if none ran.
        self._claim(now)
        self._flush(now)
        self._check_done()

    def _flush(self, now):
        if self._outcomes:
            self.store.finish(self._outcomes, now)
            self._written()

    def _written(self):
        """The outcomes are in the database: forget them, and tell whom it concerns that room freed."""
        self._outcomes = []
        if self._freed:
            freed, self._freed = self.gate.to_tell(self._freed, self.clock.time()), set()
            if freed:
                self.store.notify_freed(freed)

    def _claim_from_store(self, queues, limit, now, ids=None):
        outcomes = self._outcomes
        jobs = self.store.claim(queues, limit, now, ids=ids, finished=outcomes)
        if outcomes:
            self._written()
        return jobs

    def _claim_limited(self, group, queues, free, now):
        """Claim for a group with limited queues: one claim by query that obeys their limits."""
        outcomes = self._outcomes
        jobs, full = self.store.claim_limited(queues, free, now, finished=outcomes)
        if outcomes:
            self._written()
        self._start(group, jobs, now)
        for queue, until in full.items():
            self.gate.block(queue, until, now)
        if len(jobs) < free:
            # Queues with room had fewer due jobs than the window thought.
            self.timeline.drop_due(group, skip=self.paused | self.gate.blocked(now))

    def _drain_inbox(self):
        inbox = self._inbox
        while inbox:
            message = inbox.popleft()
            self.window.apply_message(message)
            if message.cancel:
                self.pool.request_cancel(message.cancel)
            if message.queues_changed:
                self._need_paused = True
                self.gate.free(message.queues)
            if message.freed:
                self.gate.free(message.freed, only_concurrency=True)

    def _collect(self, now):
        for job, outcome, error in self.pool.collect():
            if outcome is None:
                outcome = self.policy.raised(job, error)
            self._record(job, outcome, now)
        for job in self.pool.expire():
            logger.warning(
                "job %s timed out after %ss", job.id, job.timeout,
                extra={"job_id": job.id, "action": "timeout"},
            )
            self._record(job, self.policy.timed_out(job), now)

    def _record(self, job, outcome, now):
        if self.rollups is not None:
            self.rollups.finished(job, outcome, now)
        queue = job.queue
        self._outcomes.append(outcome)
        if queue in self.gate.limited:
            # Its slot of the queue's concurrency frees when the outcome is written.
            self._freed.add(queue)
            self.gate.free([queue], only_concurrency=True)
        self.processed += 1
        if outcome.status == Status.FAILED:
            self.failed += 1

    def _write_rollups(self, now):
        """Hand the tallies gathered since the last write to the store (kept for next time if it fails)."""
        tallies = self.rollups.take()
        try:
            self.store.write_rollups(tallies, now)
        except BaseException:
            self.rollups.put_back(tallies)
            raise
        finally:
            self._due_rollup = now + self.rollup_interval
        # The INFO summary (per-job lines are DEBUG): one line per write, when anything happened.
        since, self._last_rollup = self._last_rollup, now
        if logger.isEnabledFor(logging.INFO):
            line = summary(tallies, now - since if since is not None else self.rollup_interval)
            if line is not None:
                logger.info(
                    "dispatcher %s %s; %d/%d slots busy", self.store.worker_id, line, self.pool.busy(),
                    sum(slots for _, slots in self.groups.values()), extra={"action": "summary"},
                )

    def _heartbeat(self, now):
        cancel = self.store.renew(now)
        if cancel:
            self.pool.request_cancel(cancel)
        self.store.rescue(now)
        self.store.heartbeat(
            now, running=self.pool.busy(), processed=self.processed, failed=self.failed
        )
        self._due_heartbeat = now + self.lease / 3

    def _claim(self, now):
        if self.max_jobs is not None and self.claimed_total >= self.max_jobs:
            return
        due_groups = self.timeline.promote(now)
        # Let the database choose which due jobs run when the window may not
        # hold the best of them: it hit its cap, or (burst mode) it is empty.
        by_query = self.timeline.truncated or now < self._contended_until
        if self.burst and not due_groups and self.pool.busy() == 0:
            due_groups = set(self.groups) | {SCHEDULES}
            by_query = True
        if SCHEDULES in due_groups:
            due_groups.discard(SCHEDULES)
            self._materialize(now)
        for group in due_groups:
            free = self.pool.free(group)
            if self.max_jobs is not None:
                free = min(free, self.max_jobs - self.claimed_total)
            if free <= 0:
                continue
            queues = self.groups[group][0] - self.paused
            blocked = self.gate.blocked(now) & queues
            open_limited = (queues & self.gate.limited) - blocked
            if open_limited and (by_query or self.timeline.has_due(only=open_limited)):
                self._claim_limited(group, queues - blocked, free, now)
                continue
            # Limited queues are left to the claim above.
            limited = self.gate.limited
            queues -= limited
            if not queues:
                continue
            if not by_query:
                # The window's best due jobs, claimed by id: cheap and exact
                # while this dispatcher is alone on them.
                entries = self.timeline.take_due(group, free, skip=self.paused | limited)
                if not entries:
                    continue
                try:
                    claimed = self._claim_from_store(queues, len(entries), now, ids=[e.id for e in entries])
                except self.store.transient_errors:
                    for entry in entries:
                        self.timeline.upsert(entry)
                    raise
                free -= len(self._start(group, claimed, now))
                if len(claimed) == len(entries) or free <= 0:
                    continue
                self._contended_until = now + self.CONTENTION_BACKOFF
                # Some were gone (another dispatcher won them, or they were
                # cancelled or moved): let the database pick the next ones,
                # skipping rows other dispatchers hold.
            jobs = self._start(group, self._claim_from_store(queues, free, now), now)
            if len(jobs) < free:
                # The database has fewer due jobs than the window thought.
                self.timeline.drop_due(group, skip=limited)

    def _start(self, group, jobs, now):
        for job in jobs:
            self.timeline.remove(job.id)
            self.pool.submit(group, job)
            if self.rollups is not None:
                self.rollups.started(job, now)
        self.claimed_total += len(jobs)
        return jobs

    def _materialize(self, now):
        """Turn due schedules into jobs (the store's compare-and-set decides who does)."""
        ids = [-i for i in self.timeline.due_ids(SCHEDULES)]
        self.timeline.drop_due(SCHEDULES)
        for entry in self.store.materialize(now, ids):
            self.window.apply(entry)

    def _check_done(self):
        if self.pool.busy() or self._outcomes or self.pool.abandoned_count:
            return
        if self.max_jobs is not None and self.claimed_total >= self.max_jobs:
            self.finished = True
        elif self.burst:
            # Due jobs of paused queues cannot run: they do not keep a burst alive.
            self.timeline.promote(self.clock.time())
            if not self.timeline.has_due(skip=self.paused) and not self.store.any_due(
                self.queues - self.paused, self.clock.time()
            ):
                self.finished = True

    def _stop_step(self, now):
        if self._stop_deadline is None:
            self._stop_deadline = now + self.grace
            logger.info(
                "stopping: %d running jobs get %.1fs to finish", self.pool.busy(), self.grace,
                extra={"action": "stop"},
            )
        if not self.pool.busy() and not self._outcomes:
            self.finished = True
        elif now >= self._stop_deadline:
            unfinished = self.pool.running_jobs()
            released = self.store.release(unfinished, now)
            logger.warning(
                "grace period over: released %d unfinished jobs back to pending",
                len(released), extra={"action": "release"},
            )
            self.finished = True

    def _wait(self, now):
        if self.finished:
            return 0.0
        moments = [
            *self.window.moments(claiming=not self._stopping),
            self._due_heartbeat,
            self._due_paused,
            self._due_housekeeping,
        ]
        if self.change_check_interval:
            moments.append(self._due_change_check)
        if self.rollups is not None and self._due_rollup is not None:
            moments.append(self._due_rollup)
        if self._stopping and self._stop_deadline is not None:
            moments.append(self._stop_deadline)
        elif self._stopping:
            # stop() came from another thread during this tick: tick again
            # at once so the stop step starts its grace period.
            return 0.0
        deadline = self.pool.next_deadline()
        if deadline is not None:
            moments.append(now + (deadline - self.clock.monotonic()))
        unblock = self.gate.next_moment(self.timeline.due_queues()) if not self._stopping else None
        if unblock is not None:
            moments.append(unblock)
        if self.burst:
            moments.append(now + 0.05)
        return max(0.0, min(moments) - now)
