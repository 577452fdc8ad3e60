"""Write running attempts' log records while they run, so a job's page shows them within seconds.

A :class:`LogFlusher` belongs to an executor (the dispatcher's worker
threads share one; each worker process has its own). Every
``FLUSH_INTERVAL`` seconds, or at once when an attempt holds
``joblogs.FLUSH_RECORDS`` unwritten records, its thread writes what the
open captures hold beyond what was written: one statement for every
attempt and record (``sql.dialect().append_logs``), compare-and-set on each
running attempt, ``logs_count`` grown in the same statement. The bounds
stay the capture's (``JOB_LOG_MAX_RECORDS``, ``JOB_LOG_MAX_BYTES`` for the
whole attempt); the attempt's end closes its capture after any write in
progress, and its Outcome carries only the records not written yet,
numbered after them (``Outcome.logs_before``): no record is written twice.

The thread starts with the first capture, closes its database connection
whenever no attempt is open, and ends after ``IDLE_EXIT`` seconds without one.
"""

import logging
import threading
import time

from django.db import connections

from .. import sql
from ..lifecycle.finishing import is_transient
from ..vocabulary import storable

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 1.0  # seconds between writes while attempts run: "within a few seconds" on the job's page
IDLE_EXIT = 30.0  # seconds without an open attempt before the thread ends (the next attempt starts another)


class LogFlusher:
    """Write the open captures' new records every ``interval`` seconds, batched."""

    def __init__(self, using="default", interval=FLUSH_INTERVAL):
        self.using = using
        self.interval = interval
        self._lock = threading.Lock()
        self._captures = set()  # the open captures it writes for; under _lock
        self._thread = None  # the flushing thread while it runs; under _lock
        self._wake = threading.Event()
        self._connected = False  # whether the thread may hold a database connection; under _lock

    def add(self, capture):
        """Write ``capture``'s records from now on (its attempt's thread, as the attempt starts)."""
        with self._lock:
            self._captures.add(capture)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="scheduler-log-flusher", daemon=True)
                self._thread.start()

    def remove(self, capture):
        """Stop writing for ``capture`` (its attempt ended): a write in progress ends first."""
        capture.close()
        with self._lock:
            self._captures.discard(capture)
            if not self._captures and self._connected:
                # Close the connection now: nothing is open. Only when the
                # thread wrote since it last closed it: waking it at every
                # attempt's end cost a thread switch a job (at 1 slot, each
                # no-op job's end woke it for nothing).
                self._wake.set()

    def wake(self):
        self._wake.set()

    def _run(self):
        busy_at = time.monotonic()  # when an attempt was last open
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            with self._lock:
                captures = list(self._captures)
                now = time.monotonic()
                if captures:
                    busy_at = now
                elif now - busy_at >= IDLE_EXIT and not self._connected:
                    self._thread = None
                    return
                close = not captures and self._connected
                if close:
                    self._connected = False
            if captures:
                self.flush(captures)
            elif close:
                connections[self.using].close()

    def flush(self, captures):
        """Write what ``captures`` hold beyond what was written; return how many records were written."""
        taken = []
        for capture in captures:
            capture.lock.acquire()
            end = len(capture.records)
            if capture.closed or end == capture.flushed:
                capture.lock.release()
            else:
                taken.append((capture, end))
        if taken:
            with self._lock:
                self._connected = True
        try:
            written, dropped = self._write(taken) if taken else (0, [])
        finally:
            for capture, _ in taken:
                capture.lock.release()
        if dropped:
            with self._lock:
                self._captures.difference_update(dropped)
        return written

    def _write(self, taken):
        """Write ``taken`` ``[(capture, end)]``; return ``(records written, captures not to write for again)``."""
        attempts = [(*capture.attempt, end - capture.flushed) for capture, end in taken]
        logs = [
            (capture.attempt[0], capture.attempt[2], seq, *storable.log_record(record))
            for capture, end in taken
            for seq, record in enumerate(capture.records[capture.flushed : end], capture.base + capture.flushed + 1)
        ]
        try:
            won = sql.dialect(self.using).append_logs(attempts, logs, using=self.using)
        except Exception as exc:  # noqa: BLE001 - any refusal: transient ones retried, others written one attempt at a time
            connections[self.using].close()  # a broken connection is opened again next time
            if is_transient(exc):
                logger.info(
                    "could not write running jobs' log records now (%s); trying again",
                    exc,
                    extra={"action": "joblogs_flush"},
                )
                return 0, []
            if len(taken) > 1:  # one attempt's records must not hold up the others'
                results = [self._write([one]) for one in taken]
                return sum(n for n, _ in results), [c for _, d in results for c in d]
            # Refused alone: its records go with its Outcome, whose writer fails the job if they still cannot be stored.
            logger.warning(
                "job %s: its log records could not be written while it runs (%s)",
                taken[0][0].attempt[0],
                exc,
                extra={"job_id": taken[0][0].attempt[0], "action": "joblogs_flush"},
            )
            return 0, [taken[0][0]]
        written, gone = 0, []
        for capture, end in taken:
            if capture.attempt[0] in won:
                written += end - capture.flushed
                capture.flushed = end
            else:
                gone.append(capture)  # no longer the job's running attempt (timed out, rescued): nothing to show
        return written, gone
