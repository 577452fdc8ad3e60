"""Process-backed slots: a queue whose jobs run in worker processes instead of threads.

Threads cannot run Python in parallel, and cannot be killed (seeds 002 and
004). A queue in ``process`` mode (``rundispatcher --queue reports:2:process``
or ``SCHEDULER["QUEUES"]["reports"]["mode"] = "process"``) keeps its slots
and its pool threads, but a slot's thread hands the attempt to an idle
**worker process** (``worker_process.py``) and waits for the Outcome:

* a worker is started once (``spawn``: Django is set up once) and reused;
  the dispatcher starts one per slot of its process-only slot groups when
  it starts, so a first job does not wait for Django's setup;
* the executor, not the pool, owns a process attempt's deadline
  (``owns_deadline``): it counts from the task's own start, which the
  worker reports, so a worker's start-up never counts against ``timeout``;
  at the deadline the worker is killed (the timeout is hard, the late result
  cannot arrive); a worker that has not set Django up within
  ``START_TIMEOUT`` of being given an attempt is killed too, and the
  attempt fails with ``WorkerProcessDidNotStart`` (retried);
* a worker that dies mid-job (``kill -9``, a segfault, the OOM killer,
  ``os._exit``) fails that attempt with ``WorkerProcessDied``, saying how it
  ended, retried while attempts remain;
* a killed or dead worker is replaced at once (spawning takes milliseconds;
  the setup runs in the new process), before its slot takes the next job;
* a worker dies with its dispatcher, and so does everything its task
  started (``lifeline.py``); at the end of the grace period ``abort`` kills
  the workers still running attempts before the loop releases them;
* a cancel reaches the task's ``context.cancel_requested`` through a
  process-shared event; a task that has not stopped ``CANCEL_GRACE``
  seconds after its cancel reached this dispatcher has its worker (and its
  group) terminated, SIGTERM then SIGKILL ``TERM_WAIT`` seconds later: the
  attempt ends cancelled (so do its dependents, as for any cancel), a late
  result is never read, and the slot gets a fresh worker; progress and the task's own database work go
  through the process's own connection, as on a thread; the task's own log
  records are captured in the process and travel back in the Outcome.

Every worker process is started by one long-lived thread (``_Spawner``):
Linux sends the parent-death signal when the *thread* that started a
process ends, and slot threads end when a thread-mode job in a mixed slot
group times out, or when the pool shuts down; a worker started by one
would die with it. Workers are not tied to slot threads either: a slot
thread borrows an idle one for an attempt and gives it back.
"""

import logging
import multiprocessing
import queue
import threading
import time
from datetime import UTC, datetime

from ..vocabulary.jobs import Outcome, Status
from ..vocabulary.policy import class_path, error_entry
from .worker_process import WorkerProcess, ending

logger = logging.getLogger(__name__)

# How often a slot's thread looks at its cancel flag and the deadline while
# its process works (the cancel's latency; the deadline is met to this).
POLL = 0.02
# Seconds a worker given an attempt has to be set up (spawn, django.setup()).
START_TIMEOUT = 60.0


class WorkerProcessDied(Exception):
    """Recorded as the error of an attempt whose worker process ended before it returned."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.dispatcher.processes"


class WorkerProcessTerminated(Exception):
    """Recorded as the error of an attempt whose worker was terminated because its cancel was not honoured in time."""


class WorkerProcessDidNotStart(Exception):
    """Recorded as the error of an attempt whose worker process did not start (or not in time)."""

    # Stored data: attempts record the class by this path (where it was first defined).
    __module__ = "scheduler_app.dispatcher.processes"


class _Spawner:
    """Starts worker processes on one thread that lives as long as the executor (see the module's doc)."""

    def __init__(self, start):
        self._start = start
        self._requests = queue.SimpleQueue()  # a reply queue per request; None: exit
        self._lock = threading.Lock()
        self._thread = None
        self._stopped = False

    def start(self):
        """Return a new WorkerProcess, started on the spawner thread; raise what starting it raised."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("the process executor is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scheduler-process-spawner", daemon=True)
                self._thread.start()
        reply = queue.SimpleQueue()
        self._requests.put(reply)
        ok, value = reply.get()
        if not ok:
            raise value
        return value

    def _run(self):
        while (reply := self._requests.get()) is not None:
            try:
                reply.put((True, self._start()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                reply.put((False, exc))

    def stop(self):
        with self._lock:
            self._stopped = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._requests.put(None)
            thread.join(5)


class ProcessExecutor:
    """The pool's ``execute`` for process-mode queues: an idle worker process runs each attempt."""

    def __init__(self, policy, settings_module, using="default", *, start_timeout=START_TIMEOUT, cancel_grace=5.0):
        self.policy = policy
        self.cancel_grace = cancel_grace  # SCHEDULER["CANCEL_GRACE"]
        self.settings_module = settings_module
        self.using = using
        self.start_timeout = start_timeout
        self._context = multiprocessing.get_context("spawn")
        self._spawner = _Spawner(lambda: WorkerProcess(self._context, self.settings_module, self.using))
        self._lock = threading.Lock()
        self._idle = []  # started workers without an attempt
        self._busy = set()  # workers lent to a slot thread
        self._closed = False  # abort() or close(): no attempt starts any more

    def owns_deadline(self, job):
        """Tell the pool this executor enforces the job's timeout itself (from the task's own start)."""
        return True

    def prewarm(self, count):
        """Start ``count`` worker processes now, so that the first jobs find them set up."""
        try:
            for _ in range(count):
                self._add_idle()
        except Exception as exc:  # noqa: BLE001 - not fatal: a job that needs one starts one (and reports what fails)
            logger.warning("could not start the worker processes ahead of their jobs: %s: %s", type(exc).__name__, exc)

    def _add_idle(self):
        worker = self._spawner.start()
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        worker.kill()

    def _take(self, job):
        """Return a worker for ``job``, marked busy, or None once the executor is closed."""
        dead = []
        with self._lock:
            if self._closed:
                return None
            worker = None
            while self._idle and worker is None:
                worker = self._idle.pop()
                if worker.exited():  # it died while idle (the OOM killer?): not this attempt's doing
                    dead.append(worker)
                    worker = None
            if worker is not None:
                worker.job = job
                self._busy.add(worker)
        for gone in dead:
            gone.end()
        if worker is not None:
            return worker
        worker = self._spawner.start()
        with self._lock:
            if not self._closed:
                worker.job = job
                self._busy.add(worker)
                return worker
        worker.kill()
        return None

    def _give_back(self, worker, *, replace):
        """Return a worker that ran an attempt to the idle ones, or (``replace``) start its successor."""
        with self._lock:
            self._busy.discard(worker)
            worker.job = None
            if self._closed:
                replace = False
            elif not replace:
                self._idle.append(worker)
                return
        if replace:
            try:
                self._add_idle()
            except Exception:  # the next attempt tries again, and reports what fails
                if not self._closed:
                    logger.exception("could not start a replacement worker process")
        else:
            worker.stop()

    def __call__(self, job, cancel_event, deadline=None):
        # ``deadline`` is the pool's: None here, as this executor owns the attempt's deadline.
        try:
            worker = self._take(job)
        except Exception as exc:  # noqa: BLE001 - fork failed: memory, a process limit
            return self._start_failed(job, f"Could not start a worker process: {type(exc).__name__}: {exc}")
        if worker is None:
            return self._aborted(job)
        worker.cancel.clear()
        if cancel_event.is_set():
            worker.cancel.set()
        outcome, healthy = self._run(worker, job, cancel_event)
        self._give_back(worker, replace=not healthy)
        return outcome

    def _run(self, worker, job, cancel_event):
        """Run ``job`` on ``worker``; return ``(outcome, whether the worker can run another)``."""
        if worker.ready:
            if not self._send(worker, job):
                return self._ended(worker, job), False
        limit = time.monotonic() + self.start_timeout  # until the task starts; then its deadline
        started = False
        stop_by = None  # when a cancelled attempt's worker is terminated
        while True:
            if cancel_event.is_set():
                if not worker.cancel.is_set():
                    worker.cancel.set()
                if stop_by is None:
                    stop_by = time.monotonic() + self.cancel_grace
                elif time.monotonic() >= stop_by:
                    return self._terminated(worker, job), False
            try:
                message = worker.conn.recv() if worker.conn.poll(POLL) else None
            except (EOFError, OSError):
                return self._ended(worker, job), False
            if message is not None:
                kind, value = message
                if kind == "outcome":
                    return value, True
                if kind == "ready":
                    worker.ready = True
                    if not self._send(worker, job):
                        return self._ended(worker, job), False
                elif kind == "started":
                    started = True
                    # The worker's deadline, on this process's monotonic clock.
                    limit = None if value is None else time.monotonic() + (value - time.time())
            if limit is not None and time.monotonic() >= limit:
                worker.kill()
                if worker.aborted:
                    return self._aborted(job), False
                if started:
                    logger.warning(
                        "job %s: killed its worker process (pid %s) at its timeout",
                        job.id,
                        worker.pid,
                        extra={"job_id": job.id, "action": "process_timeout"},
                    )
                    return self.policy.timed_out(job, datetime.now(UTC)), False
                return self._start_failed(
                    job, f"The worker process did not start within {self.start_timeout:g}s; it was killed."
                ), False
            if worker.exited():  # its pipe may outlive it (a forked grandchild holds it)
                return self._ended(worker, job), False

    @staticmethod
    def _send(worker, job):
        try:
            worker.conn.send(job)
        except (OSError, ValueError):
            return False
        return True

    def _ended(self, worker, job):
        """Return the Outcome of an attempt whose worker process ended (or closed its pipe) before it returned."""
        code = worker.end(wait=1.0)  # let it finish ending by itself: its exit code says how
        if worker.aborted:
            return self._aborted(job)
        reason = f"The worker process running this attempt {ending(code)} before it returned."
        logger.warning("job %s: %s", job.id, reason, extra={"job_id": job.id, "action": "process_died"})
        return self.policy.raised(job, WorkerProcessDied(reason), datetime.now(UTC), traceback_text="")

    def _terminated(self, worker, job):
        """Terminate the worker of an attempt whose cancel it did not honour in time; return the cancelled Outcome."""
        code = worker.terminate()
        if worker.aborted:
            return self._aborted(job)
        reason = (
            f"Cancelled: the task did not stop within CANCEL_GRACE ({self.cancel_grace:g}s) of its cancel; "
            f"its worker process {ending(code)}."
        )
        logger.warning("job %s: %s", job.id, reason, extra={"job_id": job.id, "action": "process_cancel"})
        now = datetime.now(UTC)
        exc = WorkerProcessTerminated(reason)
        error = error_entry(job, exception_class=class_path(exc), message=reason, traceback_text="", now=now)
        return Outcome(job.id, job.worker, job.attempt, Status.CANCELLED, error=error)

    def _start_failed(self, job, reason):
        """Fail the attempt of a worker that did not start (retried while attempts remain: not the task's doing)."""
        logger.warning("job %s: %s", job.id, reason, extra={"job_id": job.id, "action": "process_start"})
        exc = WorkerProcessDidNotStart(reason)
        now = datetime.now(UTC)
        return self.policy.failed(
            job, error_entry(job, exception_class=class_path(exc), message=reason, traceback_text="", now=now), now
        )

    def _aborted(self, job):
        # Released (or the dispatcher is stopping): the loop writes no outcome for it.
        return self.policy.raised(
            job,
            WorkerProcessDied("Stopped: the dispatcher released this attempt."),
            datetime.now(UTC),
            traceback_text="",
        )

    def abort(self, jobs):
        """Kill (and reap) the worker processes running ``jobs``, with their groups; start no attempt from now on.

        The loop calls it at the end of the grace period, before it releases
        ``jobs`` to pending: another dispatcher may start them as soon as the
        release commits, and the attempts here must be gone by then.
        """
        with self._lock:
            self._closed = True  # an attempt a slot thread took before the pool closed never starts either
        if killed := self.stop_attempts(jobs):
            logger.info("killed %d worker processes whose attempts are released", killed, extra={"action": "release"})

    def stop_attempts(self, jobs):
        """Kill (and reap) the worker processes running ``jobs``, with their groups; return how many.

        Their slots get fresh workers. The loop calls it for attempts whose
        leases it could not renew (``LeaseWatch``): once a lease expires,
        another dispatcher may rescue the job and start it.
        """
        ids = {job.id for job in jobs}
        with self._lock:
            doomed = [worker for worker in self._busy if worker.job is not None and worker.job.id in ids]
            for worker in doomed:
                worker.aborted = True
        for worker in doomed:
            worker.kill()
        return len(doomed)

    def close(self):
        """Stop every worker process (the dispatcher is stopping): busy ones are killed, idle ones asked to exit."""
        with self._lock:
            self._closed = True
            busy, idle = list(self._busy), self._idle
            self._idle = []
            for worker in busy:
                worker.aborted = True
        for worker in busy:
            worker.kill()
        for worker in idle:
            worker.ask_to_exit()  # all at once: they exit in parallel
        for worker in idle:
            worker.end(wait=2.0)
        self._spawner.stop()


class QueueRouter:
    """The pool's ``execute``: process-mode queues go to the ProcessExecutor, the rest run on the thread."""

    lane = None  # the asyncio lane, as on the thread Executor (wiring sets it)

    def __init__(self, thread_execute, process_execute, process_queues):
        self.thread_execute = thread_execute
        self.process_execute = process_execute
        self.process_queues = frozenset(process_queues)

    def owns_deadline(self, job):
        """Tell the pool which attempts' timeouts the executor enforces itself: those in worker processes."""
        return job.queue in self.process_queues

    def __call__(self, job, cancel_event, deadline):
        if job.queue in self.process_queues:
            return self.process_execute(job, cancel_event, deadline)
        return self.thread_execute(job, cancel_event, deadline)

    def close(self):
        self.process_execute.close()
