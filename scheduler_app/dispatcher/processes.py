"""Process-backed slots: a queue whose jobs run in worker processes instead of threads.

Threads cannot run Python in parallel, and cannot be killed (seeds 002 and
004). A queue in ``process`` mode (``rundispatcher --queue reports:2:process``
or ``SCHEDULER["QUEUES"]["reports"]["mode"] = "process"``) keeps its slots
and its pool threads, but each slot's thread hands the attempt to a
**worker process** of its own and waits for the Outcome:

* the process is started once (``spawn``: Django is set up once) and reused
  for the next jobs of that slot;
* a job past its ``timeout`` has its process killed at the deadline: the
  timeout is hard, the late result cannot arrive, and the slot's next job
  gets a fresh process;
* a process that dies mid-job (``kill -9``, a segfault, the OOM killer)
  fails that attempt, retried while attempts remain, and is replaced;
* a cancel reaches the task's ``context.cancel_requested`` through a
  process-shared event; progress and the task's own database work go
  through the process's own connection, as on a thread; the task's own log
  records are captured in the process and travel back in the Outcome.

The dispatcher's loop, store and pool do not change: to them this is an
``execute(job, cancel_event, deadline)`` like the thread one.
"""

import contextlib
import logging
import multiprocessing
import os
import threading
import time
from datetime import UTC, datetime

logger = logging.getLogger(__name__)

# How often a slot's thread looks at its cancel flag and the deadline while
# its process works (the cancel's latency; the deadline is met to this).
POLL = 0.02


class WorkerProcessDied(Exception):
    """Recorded as the error of an attempt whose worker process ended before it returned."""


def _child_main(conn, cancel, settings_module, using):
    """A worker process: set Django up once, then run the attempts the parent sends."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    import django

    django.setup()
    from .wiring import executor_for

    _, executor = executor_for(using)  # as a thread slot's, per-job log capture included
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the dispatcher is gone
            return
        if message is None:
            return
        job, deadline = message
        outcome = executor(job, cancel, deadline)
        conn.send(outcome)


class _Worker:
    """One worker process and its end of the pipe (owned by one slot thread)."""

    def __init__(self, context, settings_module, using):
        self.conn, child_conn = context.Pipe()
        self.cancel = context.Event()
        self.process = context.Process(
            target=_child_main,
            args=(child_conn, self.cancel, settings_module, using),
            name="scheduler-process-slot",
            daemon=True,
        )
        self.process.start()
        child_conn.close()

    def kill(self):
        with contextlib.suppress(Exception):
            self.process.kill()
            self.process.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()

    def stop(self):
        with contextlib.suppress(Exception):
            self.conn.send(None)
        self.process.join(2)
        if self.process.is_alive():
            self.kill()


class ProcessExecutor:
    """The pool's ``execute`` for process-mode queues: one worker process per slot thread."""

    def __init__(self, policy, settings_module, using="default"):
        self.policy = policy
        self.settings_module = settings_module
        self.using = using
        self._context = multiprocessing.get_context("spawn")
        self._local = threading.local()  # the calling slot thread's _Worker
        self._lock = threading.Lock()
        self._workers = set()  # every live worker, for close()

    def _worker(self):
        worker = getattr(self._local, "worker", None)
        if worker is None or not worker.process.is_alive():
            worker = _Worker(self._context, self.settings_module, self.using)
            self._local.worker = worker
            with self._lock:
                self._workers.add(worker)
        return worker

    def _forget(self, worker):
        self._local.worker = None
        with self._lock:
            self._workers.discard(worker)

    def __call__(self, job, cancel_event, deadline):
        worker = self._worker()
        worker.cancel.clear()
        if cancel_event.is_set():
            worker.cancel.set()
        try:
            worker.conn.send((job, deadline))
        except (BrokenPipeError, OSError):
            worker.kill()
            self._forget(worker)
            return self._died(job, worker)
        while True:
            try:
                if worker.conn.poll(POLL):
                    return worker.conn.recv()
            except (EOFError, OSError):
                worker.kill()
                self._forget(worker)
                return self._died(job, worker)
            if cancel_event.is_set() and not worker.cancel.is_set():
                worker.cancel.set()
            if deadline is not None and time.time() >= deadline:
                # Hard timeout: the process goes, and with it the late result.
                worker.kill()
                self._forget(worker)
                logger.warning(
                    "job %s: killed its worker process (pid %s) at its timeout", job.id, worker.process.pid,
                    extra={"job_id": job.id, "action": "process_timeout"},
                )
                return self.policy.timed_out(job, datetime.now(UTC))
            if not worker.process.is_alive():
                self._forget(worker)
                return self._died(job, worker)

    def _died(self, job, worker):
        code = worker.process.exitcode
        reason = f"The worker process running this attempt ended (exit code {code}) before it returned."
        logger.warning("job %s: %s", job.id, reason, extra={"job_id": job.id, "action": "process_died"})
        return self.policy.raised(job, WorkerProcessDied(reason), datetime.now(UTC), traceback_text="")

    def close(self):
        """Stop every worker process (the dispatcher is stopping)."""
        with self._lock:
            workers, self._workers = list(self._workers), set()
        for worker in workers:
            worker.stop()


class QueueRouter:
    """The pool's ``execute``: process-mode queues go to the ProcessExecutor, the rest run on the thread."""

    def __init__(self, thread_execute, process_execute, process_queues):
        self.thread_execute = thread_execute
        self.process_execute = process_execute
        self.process_queues = frozenset(process_queues)

    def __call__(self, job, cancel_event, deadline):
        if job.queue in self.process_queues:
            return self.process_execute(job, cancel_event, deadline)
        return self.thread_execute(job, cancel_event, deadline)

    def close(self):
        self.process_execute.close()
