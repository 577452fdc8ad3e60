"""The asyncio lane: the attempts of ``async`` queues, as tasks of one event loop on a thread of its own.

A queue in ``async`` mode (``rundispatcher --queue io:200:async`` or
``SCHEDULER["QUEUES"]["io"]["mode"] = "async"``) keeps its slots in the pool
(``pool.py``: the loop claims only for free slots, invariant 3), but an
attempt of an ``async def`` task does not take a worker thread: the pool
hands it to the lane, which runs it as an ``asyncio.Task`` on the lane's
loop, so hundreds of attempts that await I/O run on one thread. The lane
reports each outcome the way a worker thread does (the pool's ``done``
callback), and the dispatcher writes it as any other.

Stopping an attempt is real here, where a thread can only be asked:

* a cancel (an operator's, or a lease this dispatcher could not renew)
  sets the attempt's cancel flag and cancels its asyncio task: the task
  sees ``CancelledError`` at its next ``await``;
* at its deadline the pool cancels it the same way, and keeps its slot
  until the coroutine has actually returned (one that swallows the
  cancel, or blocks the loop, still runs);
* at the end of the grace period ``abort`` cancels the attempts about to
  be handed back and waits up to ``ABORT_WAIT`` seconds (a quarter of the
  lease at most) for them to end, before the hand-back commits.

Nothing here imports Django: ``run`` (a coroutine function
``(job, cancel_event, deadline) -> Outcome``) and ``takes`` (which attempts
run here) are injected by ``runtime/async_executor.py``.
"""

import asyncio
import contextvars
import logging
import threading
import time

logger = logging.getLogger(__name__)

# Seconds the loop thread waits for cancelled attempts to end at a hand-back, and for the lane's loop to stop;
# at most a quarter of the lease: the loop renews no lease meanwhile, and its guardian would kill it.
ABORT_WAIT = 5.0


def abort_wait(lease):
    """Return how long the hand-back waits for cancelled attempts to end, given the dispatcher's ``lease``."""
    return min(ABORT_WAIT, lease / 4)


class AsyncLane:
    """One event loop on one thread; runs attempts as asyncio tasks and reports how they ended."""

    def __init__(self, run, takes, *, wait=ABORT_WAIT, name="scheduler-asyncio"):
        self._run = run
        self._takes = takes
        self.wait = wait  # seconds abort() and close() wait for attempts to end (see ``abort_wait``)
        self.name = name
        self._lock = threading.Lock()  # guards _loop, _thread, _closed
        self._loop = None
        self._thread = None
        self._closed = False  # start nothing more (the pool closed, or the lane)
        self._aborted = False  # abort() waited already: close() does not wait again
        self._tasks = {}  # token -> _Attempt; the lane's thread only

    def takes(self, job):
        """Return whether ``job``'s attempt runs on this lane (else on a worker thread)."""
        return self._takes(job)

    # -- from the dispatcher's loop thread ---------------------------------

    def start(self, token, job, cancel_event, deadline, *, refuse, done):
        """Run ``job`` on the lane; ``done(token, outcome, error)`` is called on the lane's thread when it ends.

        ``refuse(job, now)`` is asked right before it starts, as a worker thread asks.
        """
        self._call(self._begin, token, job, cancel_event, deadline, refuse, done)

    def cancel(self, token):
        """Cancel the asyncio task of attempt ``token`` (its cancel flag is the pool's to set)."""
        self._call(self._cancel, token)

    def close_starts(self):
        """Start no attempt from now on: one handed over but not begun stays unstarted (the pool closed)."""
        with self._lock:
            self._closed = True

    def abort(self, jobs, wait=None):
        """Cancel the attempts of ``jobs`` and wait up to ``wait`` seconds for them to end; return how many did not.

        The loop calls it at the end of the grace period, before it hands
        them back: an attempt that ended is not running any more when its
        job is handed back.
        """
        self.close_starts()
        self._aborted = True
        wait = self.wait if wait is None else wait
        loop = self._loop
        ids = {job.id for job in jobs}
        if loop is None or not ids or not loop.is_running():
            return 0
        try:
            left = asyncio.run_coroutine_threadsafe(self._cancel_jobs(ids, wait), loop).result(_beyond(wait))
        except Exception:  # noqa: BLE001 - the loop is stuck (a task blocks it): they end with the process
            left = len(ids)
        if left:
            logger.warning(
                "%d async attempts did not end within %gs of their cancel; they end with this process",
                left,
                wait,
                extra={"action": "release"},
            )
        return left

    def close(self, wait=None):
        """Cancel whatever still runs and wait up to ``wait`` seconds; then stop the loop and its thread.

        When an attempt has still not ended (it ignores its cancel, or waits
        for a thread of its own: asgiref waits for its sync call to return),
        the loop is left running: ``live_thread`` keeps saying so, so that
        the jobs handed back wait for this process to end (``handback.py``).
        """
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None:
            return
        wait = 0.0 if self._aborted else self.wait if wait is None else wait
        try:
            left = asyncio.run_coroutine_threadsafe(self._cancel_jobs(None, wait), loop).result(_beyond(wait))
        except Exception:  # noqa: BLE001 - the loop is stuck; the thread is a daemon and ends with the process
            return
        if left:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_beyond(self.wait))

    def live_thread(self):
        """Return the lane's OS thread while it runs, else None."""
        thread = self._thread
        return thread if thread is not None and thread.is_alive() else None

    # -- the lane's thread ---------------------------------------------------

    def _call(self, function, *args):
        with self._lock:
            if self._loop is None:
                ready = threading.Event()
                self._thread = threading.Thread(target=self._serve, args=(ready,), name=self.name, daemon=True)
                self._thread.start()
                ready.wait()
            loop = self._loop
        if not loop.is_closed():
            loop.call_soon_threadsafe(function, *args)

    def _serve(self, ready):
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _begin(self, token, job, cancel_event, deadline, refuse, done):
        if self._closed:
            return  # handed over before the pool closed, not begun: it never starts (it is handed back)
        # A context of its own, empty as a fresh thread's (not the dispatcher's, which handed it over).
        coroutine = self._attempt(token, job, cancel_event, deadline, refuse, done)
        task = self._loop.create_task(coroutine, context=contextvars.Context())
        self._tasks[token] = _Attempt(job.id, task, cancel_event)

    async def _attempt(self, token, job, cancel_event, deadline, refuse, done):
        outcome = error = None
        self._tasks[token].started = True
        try:
            outcome = refuse(job, time.time()) if refuse is not None else None
            if outcome is None:
                outcome = await self._run(job, cancel_event, deadline)
        except BaseException as exc:  # ``run`` should not raise; never lose a slot
            if not isinstance(exc, asyncio.CancelledError):
                logger.exception("the asyncio lane's run raised for job %s", getattr(job, "id", "?"))
            outcome, error = None, exc
        finally:
            self._tasks.pop(token, None)
        done(token, outcome, error)

    def _cancel(self, token):
        entry = self._tasks.get(token)
        if entry is None or entry.cancelled:
            return
        # Once: a cancel, its deadline, a lost lease and the hand-back may all come; the attempt ends at the first.
        entry.cancelled = True
        entry.cancel_event.set()
        if entry.started:
            entry.task.cancel()
        # Else the flag stops it as it starts (``Executor.prepare``): a task cancelled before its first step
        # would end without a word (CancelledError thrown in before any handler).

    async def _cancel_jobs(self, ids, wait):
        """Cancel the tasks of job ``ids`` (None: all); return how many had not ended ``wait`` seconds later."""
        tokens = [token for token, entry in self._tasks.items() if ids is None or entry.job_id in ids]
        tasks = [self._tasks[token].task for token in tokens]
        for token in tokens:
            self._cancel(token)
        if not tasks:
            return 0
        _, pending = await asyncio.wait(tasks, timeout=wait) if wait else (None, [t for t in tasks if not t.done()])
        return len(pending)


def _beyond(wait):
    """Return how long the dispatcher's thread waits for an answer the lane gives after ``wait`` seconds.

    Past it the lane's loop is taken to be stuck (a task blocks it): what it runs ends with the process.
    """
    return wait * 1.25 + 0.05


class _Attempt:
    """An attempt on the lane (the lane's thread only)."""

    __slots__ = ("job_id", "task", "cancel_event", "started", "cancelled")

    def __init__(self, job_id, task, cancel_event):
        self.job_id = job_id
        self.task = task
        self.cancel_event = cancel_event
        self.started = False  # its coroutine took its first step
        self.cancelled = False  # cancelled once already
