"""An attempt on the asyncio lane: the thread executor's attempt, as a coroutine on the lane's loop.

``dispatcher/asyncio_lane.py`` runs it; the parts are ``executor.py``'s
(``Executor.prepare``, ``outcome_of``, ``tell_finished``, ``with_logs``,
``context``), so an attempt ends the same way on either lane: the same
Outcomes, the same timeout, the same log capture, the same signals.

Which attempts run here (``takes``): those of the lane's queues whose task
is an ``async def`` function. A plain (sync) task sent to an ``async``
queue runs on a worker thread of the pool, exactly as in a ``thread``
queue, taking one of the queue's slots: the queue's mode may come from the
command line, which no enqueue can see, so refusing at enqueue could not be
the whole story.

Nothing the lane does for itself blocks its loop. What waits on the
database or on a lock (the count of a snoozed attempt's stored log
records, ``task_started`` and ``task_finished`` and their receivers,
closing the log capture after a write in progress, progress reported with
``context.set_progress``) runs on one bookkeeping thread, in order, in the
attempt's context (its log records stay the attempt's); its connection is
checked before each call and closed whenever nothing is left to run. The
outcome is written by the dispatcher's loop thread, as a thread's is.

The task's own database work is its business: Django's async ORM methods
or ``sync_to_async``, as in an async view. Each attempt gets a
``ThreadSensitiveContext``: its thread-sensitive sync calls run on a thread
of their own (as Django gives each ASGI request), and that thread's
connections are closed when the attempt ends.
"""

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
import time
from concurrent.futures import Future
from inspect import iscoroutinefunction

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections, connections
from django.tasks.signals import task_started

from .. import conf, lifecycle, registry, taskresults
from ..observability import joblogs, redacting
from ..vocabulary.redaction import secret_texts
from . import forks
from .executor import ENDINGS, Call, log_killed, log_outcome, log_start, with_logs


class AsyncExecutor:
    """The lane's ``run(job, cancel_event, deadline)`` (a coroutine function) and ``takes(job)``."""

    def __init__(self, executor, queues):
        self.executor = executor  # the thread Executor: its policy, database alias, log flusher and parts
        self.queues = frozenset(queues)
        # The lane's own blocking work, in order, off the loop (see the module's doc).
        self._io = _OneThread("scheduler-asyncio-io", idle=connections.close_all)

    def takes(self, job):
        """Return whether ``job`` runs on the lane: an ``async def`` task of one of its queues."""
        if job.queue not in self.queues:
            return False
        try:
            return iscoroutinefunction(registry.get(job.task).func)
        except registry.UnknownTask:
            return False  # the thread executor fails it, saying why

    async def __call__(self, job, cancel_event, deadline):
        started = time.monotonic()
        log_start(job)
        # A child the task forked never reports for the slot, nor outlives the attempt (forks.py).
        with forks.attempt() as attempt:
            outcome = await self._attempt(job, cancel_event, deadline)
        log_killed(job, attempt)
        log_outcome(job, outcome, time.monotonic() - started)
        return outcome

    async def _attempt(self, job, cancel_event, deadline):
        secrets = secret_texts([job.args, job.kwargs], conf.filter_names())
        captured = token = None
        try:
            # Off the loop only when it reads the database: a hop to the bookkeeping thread per attempt
            # made that one thread the lane's bottleneck.
            base = await self._offload(self.executor.stored_logs, job) if self.executor.reads_stored_logs(job) else 0
            key = (job.id, job.worker, job.attempt)
            captured, token = joblogs.open_capture(key, self.executor.flusher, base, secrets)
            with redacting.hiding(secrets):
                outcome = await self._run(job, cancel_event, deadline)
        except asyncio.CancelledError as exc:  # cancelled (or timed out) before the task was called
            outcome = self.executor.outcome_of(job, deadline, exc=exc)
        finally:
            if token is not None:
                joblogs.stop_capturing(token)
            if captured is not None and not joblogs.close_capture_at_once(captured):
                # A write of its records in progress ends first: waited for off the loop.
                await _to_the_end(self._offload(joblogs.close_capture, captured))
        return with_logs(outcome, secrets, captured)

    async def _run(self, job, cancel_event, deadline):
        executor = self.executor
        call = executor.prepare(job, cancel_event)
        if not isinstance(call, Call):
            return call
        try:
            if call.start:
                await self._offload(taskresults.send, task_started, call.sender, call.result)
            arguments = job.args
            if call.task.takes_context:
                report = self._reporter(job)
                arguments = [executor.context(call.result, job, cancel_event, deadline, report), *job.args]
            async with _own_sync_thread():
                value = await forks.acall(call.task, *arguments, **job.kwargs)
        except (Exception, SystemExit, asyncio.CancelledError) as exc:  # noqa: BLE001 - the attempt's ending
            # A cancel (an operator's, a lost lease) or the deadline cancels the asyncio task: CancelledError.
            outcome = executor.outcome_of(job, deadline, exc=exc)
            if not isinstance(exc, ENDINGS):
                if executor.finish_heard(call, outcome, exc):
                    await _to_the_end(self._offload(_in_handler, exc, executor.tell_finished, call, job, outcome, exc))
                return outcome
        else:
            outcome = executor.outcome_of(job, deadline, value=value)
        if executor.finish_heard(call, outcome):
            await _to_the_end(self._offload(executor.tell_finished, call, job, outcome))
        return outcome

    def _reporter(self, job):
        """Return the context's ``report(progress)``: on the loop it hands the write to the bookkeeping thread."""
        write = functools.partial(lifecycle.set_progress, job.id, job.worker, job.attempt, using=self.executor.using)

        def report(progress):
            # Every write of the attempt's progress on one thread, in the order reported.
            written = self._io.submit(_recycled, write, progress)
            if _on_a_loop():
                return True  # never wait there (whether the attempt is current is not known yet)
            return written.result()  # on a thread (``context.aset_progress``): say whether it is current

        return report

    async def _offload(self, function, *args):
        """Return ``function(*args)``, run on the bookkeeping thread in this context."""
        context = contextvars.copy_context()
        return await asyncio.wrap_future(self._io.submit(context.run, _recycled, function, *args))

    def close(self):
        """Let the bookkeeping thread end once what was handed to it is done (the dispatcher is stopping)."""
        self._io.close()


class _OneThread:
    """Calls run in order on one daemon thread, started at the first.

    Not a ThreadPoolExecutor: Python joins its threads at exit, and a write
    stuck on an unreachable database would hold the dispatcher's exit. Its
    connections are closed whenever it has nothing left to run (as the log
    flusher's): a burst of writes shares one, an idle lane holds none.
    """

    def __init__(self, name, idle=None):
        self.name = name
        self._idle = idle  # called whenever nothing is left to run (closing the thread's connections)
        self._calls = queue.SimpleQueue()  # (Future, function, args); None: exit
        self._lock = threading.Lock()
        self._thread = None  # under _lock
        self._closed = False  # under _lock

    def submit(self, function, *args):
        """Return a ``concurrent.futures.Future`` of ``function(*args)``, run after those submitted before."""
        future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the asyncio lane's bookkeeping thread is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._calls.put((future, function, args))
        return future

    def _serve(self):
        while (call := self._calls.get()) is not None:
            future, function, args = call
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(*args))
                except BaseException as exc:  # noqa: BLE001 - the caller's to handle
                    future.set_exception(exc)
            if self._idle is not None and self._calls.empty():
                self._idle()
        if self._idle is not None:
            self._idle()

    def close(self):
        with self._lock:
            self._closed = True
            if self._thread is not None:
                self._calls.put(None)


def _on_a_loop():
    """Return whether this thread runs an event loop (where nothing may wait)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _recycled(function, *args):
    """Call ``function(*args)`` with this thread's connection recycled first, as a worker thread's is before a job."""
    close_old_connections()
    return function(*args)


def _in_handler(exc, function, *args):
    """Call ``function(*args)`` inside a handler of ``exc`` (Django's log receiver reads ``sys.exc_info()``)."""
    try:
        raise exc
    except BaseException:  # noqa: BLE001 - re-raised only to be handled here
        return function(*args)


async def _to_the_end(awaitable):
    """Await ``awaitable`` to its end, even if the attempt is cancelled meanwhile: it is bookkeeping, not the task."""
    future = asyncio.ensure_future(awaitable)
    while True:
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                return future.result()


@contextlib.asynccontextmanager
async def _own_sync_thread():
    """Give the attempt's thread-sensitive sync calls a thread of their own; close its connections at the end."""
    async with ThreadSensitiveContext() as context:
        try:
            yield
        finally:
            # Only when the task made such a call (asgiref started the thread then).
            if context in getattr(SyncToAsync, "context_to_thread_executor", {}):
                await _to_the_end(sync_to_async(connections.close_all)())
