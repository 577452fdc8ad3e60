"""The dispatcher loop: one ``tick(now)`` per wake-up, and ``run()`` around it.

Only this thread talks to the store. It sleeps on one waiter (an Event, or
``waiter.Waiter`` that also reads the LISTEN socket), for as long as
``tick`` says: until the earliest waiting job is due, the next timer (change
poll, full reload, heartbeat, pause flags, maintenance, rollups), the
nearest job deadline, or a wake-up (a notification, a finished job,
``stop()``). The claim step is ``claiming.Claimer``, the stop ``stopping``.

Nothing here imports Django: the store, the executor and the clock are
injected, so tests drive ``tick`` with a fake clock and an in-memory store.
"""

import collections
import logging
import threading
import time
from datetime import UTC, datetime

from ..vocabulary.clock import SystemClock
from ..vocabulary.jobs import Status
from ..vocabulary.policy import RetryPolicy
from .claiming import Claimer
from .gate import Gate
from .handback import HandBack
from .leases import LeaseWatch
from .outcomes import OutcomeBuffer
from .pool import WorkerPool
from .rollups import Reporter
from .stopping import StopSteps
from .timeline import SCHEDULES, Timeline
from .window import Window

logger = logging.getLogger(__name__)


def _moment(now):
    """Return loop time ``now`` (epoch seconds) as the aware datetime outcomes record."""
    return datetime.fromtimestamp(now, UTC)


class Dispatcher(StopSteps):
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
        self.housekeeping_interval = housekeeping_interval
        self.pause_interval = pause_interval
        # Where other processes cannot notify (SQLite): how often to ask the store whether anyone committed.
        self.change_check_interval = change_check_interval
        self._assemble(
            store,
            execute,
            horizon=horizon,
            cap=cap,
            poll_interval=poll_interval,
            full_sync_interval=full_sync_interval,
            sync_overlap=sync_overlap,
            max_abandoned=max_abandoned,
            max_jobs=max_jobs,
            rollup_interval=rollup_interval,
        )
        self._fresh_state()

    def _assemble(
        self,
        store,
        execute,
        *,
        horizon,
        cap,
        poll_interval,
        full_sync_interval,
        sync_overlap,
        max_abandoned,
        max_jobs,
        rollup_interval,
    ):
        """Build the loop's parts: the window, the pool, the gate, the outcomes, the leases, the claim step."""
        # Loop thread only: the window, the per-minute tallies (None: not kept), the full limited queues.
        self.rollups = Reporter(rollup_interval, logger) if rollup_interval else None
        self.timeline = Timeline(self._group_of, cap)
        self.window = Window(
            self.timeline,
            self.queues,
            horizon=horizon,
            poll_interval=poll_interval,
            full_sync_interval=full_sync_interval,
            sync_overlap=sync_overlap,
        )
        slots = {name: slots for name, (_, slots) in self.groups.items()}
        # A worker asks the leases, right before it starts an attempt, whether it still may.
        refuse = lambda job, now: self.leases.refuse(job, now)  # noqa: E731
        self.pool = WorkerPool(
            slots, execute, wake=self.wake, clock=self.clock, max_abandoned=max_abandoned, refuse=refuse
        )
        self.gate = Gate(retry_interval=poll_interval)
        self.outcomes = OutcomeBuffer(self.gate, self.rollups)
        self.leases = LeaseWatch(self.lease, self.pool, self.policy)
        self.hand_back = HandBack(store, self.pool, self.lease)
        self.claims = Claimer(store, self.groups, self, max_jobs=max_jobs, burst=self.burst)

    def _fresh_state(self):
        """The loop's own state: the wake-up, the inbox, the timers, the flags."""
        self._event = threading.Event()  # any thread sets it to wake the loop
        self._inbox = collections.deque()  # any thread appends payloads; loop pops
        self._stopping = False  # any thread sets it through stop()
        # Loop thread only, below: when each timer is due next, the database back-off.
        self._stop_deadline = None
        self._due_heartbeat = self._due_paused = self._due_maintenance = self._due_change_check = 0.0
        self._db_retry_at = self._db_backoff = 0.0
        self.paused = frozenset()
        self.on_exit = []  # callables run when run() ends (e.g. stop worker processes)
        # Given the unfinished attempts at the grace's end, before their release: each stops them for good.
        self.before_release = []
        self.process_queues = frozenset()  # queues whose jobs run in worker processes (wiring sets it)
        self.async_queues = frozenset()  # queues whose async tasks run on the asyncio lane (wiring sets it)
        self.overdue = {}  # job id -> (job, retry Outcome) of a timed-out attempt whose thread runs on; loop only
        self.finished = self._need_paused = False

    def _group_of(self, queue):
        """Return the slot group of ``queue``; schedules have a pseudo-group without slots."""
        if queue == SCHEDULES:
            return SCHEDULES
        return self.queue_group.get(queue)

    @property
    def claimed_total(self):
        return self.claims.claimed_total

    @property
    def max_jobs(self):
        return self.claims.max_jobs

    @property
    def processed(self):
        return self.outcomes.processed

    @property
    def failed(self):
        return self.outcomes.failed

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
        self.store.register(queues=self.queues, slots={name: slots for name, (_, slots) in self.groups.items()})
        try:
            while not self.finished:
                self._event.clear()
                wait = self.tick(self.clock.time())
                if self.finished:
                    break
                if wait > 0:
                    self._event.wait(wait)
                    if self.pool.busy():
                        # Yield the GIL once: worker threads that finished at the same moment report
                        # now, so one round trip records (and refills) several slots. Not when none
                        # runs: the yield is a sleep of the timer slack added to an idle pickup.
                        time.sleep(0)
                else:
                    self.poll_wakeups()  # no sleep, but what arrived is read
        finally:
            self.pool.shutdown()
            for close in self.on_exit:
                close()
            self.hand_back.retire_when_done()
            try:
                if self.rollups is not None:
                    self._write_rollups(self.clock.time(), final=True)
            except self.store.transient_errors:
                logger.warning("could not write the last rollups (database unavailable)")
            try:
                self.store.unregister(processed=self.processed, failed=self.failed)
            except self.store.transient_errors:
                logger.warning("could not mark this dispatcher stopped (database unavailable)")
        return 0

    def tick(self, now):
        """Do one pass at time ``now``; return how many seconds to wait."""
        self.leases.check(now)
        if self._stopping and self._stop_deadline is None:
            self._begin_stop(now)
        past_grace = self._stop_deadline is not None and now >= self._stop_deadline
        if now < self._db_retry_at and not past_grace:
            return self._retry_wait(now)
        try:
            self._tick(now)
        except Exception as exc:
            if self._give_up(now, exc):
                return 0.0
            self._back_off(now)
            if isinstance(exc, self.store.transient_errors):
                logger.warning(
                    "database unavailable (%s); retrying in %.2fs", exc, self._db_backoff, extra={"action": "db_error"}
                )
            else:  # a bug, or a row nobody foresaw: never a silent exit; the outcomes are kept
                logger.exception(
                    "unexpected error in the dispatcher loop; retrying in %.2fs",
                    self._db_backoff,
                    extra={"action": "loop_error"},
                )
            return self._retry_wait(now)
        self._db_backoff = 0.0
        # Measure the wait from the end of the tick, not its start: a tick
        # that took 3 ms must not make the next wake-up 3 ms late.
        return self._wait(self.clock.time())

    def _back_off(self, now):
        self._db_backoff = min(max(self._db_backoff * 2, 0.25), 10.0)
        self._db_retry_at = now + self._db_backoff
        self.store.reset()

    def _retry_wait(self, now):
        """Seconds until the next try after a database error: no later than a lease to stop or the end of the grace."""
        moments = (self._db_retry_at, self._stop_deadline, self.leases.moment())
        return max(0.0, min(m for m in moments if m is not None) - now)

    def _tick(self, now):
        self._drain_inbox()
        self._collect(now)
        if self.change_check_interval and now >= self._due_change_check:
            if self.store.data_changed():
                self.window.need_poll = True
                # Another process committed: perhaps a finish in a full queue (no NOTIFY here).
                self.gate.free(self.gate.limited, only_concurrency=True)
                self.claims.keys_changed()
                if self.pool.busy():
                    # Where no NOTIFY carries a cancel (SQLite), the same
                    # cheap check brings it to the running task at once.
                    self.pool.request_cancel(self.store.cancel_requests())
            self._due_change_check = now + self.change_check_interval
        self.window.sync(self.store, now)
        if now >= self._due_heartbeat:
            self._heartbeat(now)
        if now >= self.hand_back.due:
            self.hand_back.take_back(now)
        if self._need_paused or now >= self._due_paused:
            self.paused = frozenset(self.store.paused_queues())
            self.gate.update(self.store.limited_queues())
            self._need_paused = False
            self._due_paused = now + self.pause_interval
        if now >= self._due_maintenance:
            # The leader runs the services that are due; the others look whether to lead.
            self._due_maintenance = self.store.maintain(now, housekeeping_interval=self.housekeeping_interval)
        if self.rollups is not None and self.rollups.due(now):
            self._write_rollups(now)
        if self._stopping:
            self._flush(now)
            self._stop_step(now)
            return
        # The first claim of the tick also records the outcomes collected
        # above (one round trip on PostgreSQL); flush them if none ran.
        self.claims.claim(now, self.paused)
        self._flush(now)
        self._check_done()

    def _flush(self, now):
        if self.outcomes.pending:
            self.store.finish(self.outcomes.pending, now)
            self.outcomes.written(self.store, self.clock.time())

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
                self.claims.keys_changed()
            if message.handed_back:
                self.hand_back.told()

    def _collect(self, now):
        moment = _moment(now)
        collected = len(self.outcomes.pending)
        if ended := self.pool.collect():
            self.outcomes.add_many(self.leases.ended(ended, moment), now)
        for job_id in self.pool.returned():
            if (held := self.overdue.pop(job_id, None)) is not None:
                self.outcomes.add(*held, now)
        for job in self.pool.expire():
            outcome = self.policy.timed_out(job, moment)
            # A retry waits for the overdue thread to return: until then the job stays running here, its
            # lease renewed, so that no other dispatcher starts it beside that thread (invariant 14).
            held = outcome.status == Status.PENDING and self.pool.runs_on(job.id)
            logger.warning(
                "job %s timed out after %ss%s",
                job.id,
                job.timeout,
                "; its thread runs on: retried once it returns" if held else "",
                extra={"job_id": job.id, "action": "timeout"},
            )
            self.leases.lost.discard(job.id)
            if held:
                self.overdue[job.id] = (job, outcome)
            else:
                self.outcomes.add(job, outcome, now)
        if len(self.outcomes.pending) != collected:
            self.claims.keys_changed()  # a job ended: its key may have room
            if not self.pool.busy() and not self.overdue:
                self.leases.idle()
        self.claims.release_held()

    def _write_rollups(self, now, final=False):
        slots = sum(slots for _, slots in self.groups.values())
        self.rollups.write(self.store, now, busy=self.pool.busy(), slots=slots, final=final)

    def _heartbeat(self, now):
        # Only the attempts still running: an outcome this dispatcher could
        # not write keeps its old lease, which expires (invariant 13).
        running = [job.id for job in self.pool.running_jobs()] + list(self.overdue)
        cancel = self.store.renew(now, running)
        self.leases.renewed(now, running)
        if cancel:
            self.pool.request_cancel(cancel)
        self.store.heartbeat(now, running=self.pool.busy(), processed=self.processed, failed=self.failed)
        self._due_heartbeat = now + self.lease / 3

    def _wait(self, now):
        if self.finished:
            return 0.0
        moments = [
            *self.window.moments(claiming=not self._stopping),
            self._due_heartbeat,
            self.hand_back.due,
            self._due_paused,
            self._due_maintenance,
        ]
        if self.change_check_interval:
            moments.append(self._due_change_check)
        if self.rollups is not None and self.rollups.next_write is not None:
            moments.append(self.rollups.next_write)
        if self._stopping and self._stop_deadline is not None:
            moments.append(self._stop_deadline)
        elif self._stopping:
            # stop() came from another thread during this tick: tick again
            # at once so the stop step starts its grace period.
            return 0.0
        deadline = self.pool.next_deadline()
        if deadline is not None:
            moments.append(now + (deadline - self.clock.monotonic()))
        lease_moment = self.leases.moment()
        if lease_moment is not None:
            moments.append(lease_moment)
        unblock = self.gate.next_moment(self.timeline.due_queues()) if not self._stopping else None
        if unblock is not None:
            moments.append(unblock)
        keyed = self.claims.next_moment(now) if not self._stopping else None
        if keyed is not None:
            moments.append(keyed)
        if self.burst:
            moments.append(now + 0.05)
        return max(0.0, min(moments) - now)
