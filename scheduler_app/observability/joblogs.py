"""Per-job logs: keep the log records a job's own thread emits while it runs.

A log record factory (:func:`install`, by the dispatcher) keeps a record
only when the thread that makes it is running an attempt: the executor
opens a :class:`Capture` around the task call and the factory finds it
through a context variable (so a worker thread sees only its own job's,
and an ``async`` task's records, run by asgiref on its loop's thread with
the caller's context, count too). Records of the scheduler's own loggers
and of ``django.tasks`` are not kept: they describe the attempt, they are
not the task's.

Bounded per attempt (``JOB_LOG_MAX_RECORDS``, ``JOB_LOG_MAX_BYTES``): past
either, records are counted, and one "N more records dropped" line ends
the attempt's log. While the attempt runs, a :class:`~.logflush.LogFlusher`
(the executor's, in the dispatcher's process and in each worker process)
writes what its captures hold every second or so, batched; the records not
written yet travel in the attempt's Outcome and are written by the
statement that records it (``sql``), numbered after those; never one by one.
"""

import contextlib
import contextvars
import logging
import threading
import time

from .. import conf
from ..validation.settings import SETTINGS
from ..vocabulary.redaction import scrub
from ..vocabulary.storable import utf8_size

# The scheduler's own loggers and Django's task log describe the attempt;
# its built-in and demo tasks log as tasks do.
OWN = ("scheduler_app", "django.tasks")
TASK_MODULES = ("scheduler_app.tasks", "scheduler_app.demo")
DROPPED_LOGGER = "scheduler_app.joblogs"
# Unwritten records that make a running attempt's flusher write at once.
FLUSH_RECORDS = 500
_current = contextvars.ContextVar("scheduler_job_capture", default=None)
_formatter = logging.Formatter()


def is_own(name):
    """Return whether logger ``name`` is the scheduler's or ``django.tasks`` (not kept with jobs)."""
    if not name.startswith(OWN) or name.startswith(TASK_MODULES):
        return False
    return name in OWN or name.startswith(("scheduler_app.", "django.tasks."))


class Capture:
    """The records of one attempt, in the order they were emitted."""

    __slots__ = (
        "level",
        "max_records",
        "max_bytes",
        "records",
        "size",
        "dropped",
        "attempt",
        "flusher",
        "flushed",
        "lock",
        "closed",
        "base",
        "secrets",
    )

    def __init__(self, level, max_records, max_bytes, attempt=None, flusher=None, base=0, secrets=()):
        self.level = level
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records = []  # appended by the attempt's thread only; read by the flusher up to a length it took
        self.size = 0
        self.dropped = 0
        # ``(job id, worker, attempt)`` whose running attempt the flusher writes for (None: nothing live).
        self.attempt = attempt
        self.flusher = flusher
        self.flushed = 0  # records already written while the attempt ran; under ``lock``
        self.lock = threading.Lock()  # held by the flusher while it writes, and by the attempt's end
        self.closed = False  # the attempt ended: the flusher leaves it alone; under ``lock``
        # Records its attempt number already holds: a snoozed run gives its number back (see ``stored``).
        self.base = base
        # The job's FILTER_ARGUMENTS values: a record that quotes one keeps [FILTERED] instead.
        self.secrets = secrets

    def add(self, record):
        if record.levelno < self.level:
            return
        name = record.name
        if is_own(name):
            return
        if len(self.records) >= self.max_records:
            self.dropped += 1
            return
        try:
            message = record.getMessage()
        except Exception as exc:  # noqa: BLE001 - a bad %-format in the task's own call
            message = f"{record.msg!r} (could not format: {type(exc).__name__})"
        if not isinstance(message, str):
            message = str(message)
        exc_text = _formatter.formatException(record.exc_info) if record.exc_info else ""
        if self.secrets:
            message, exc_text = scrub(message, self.secrets), scrub(exc_text, self.secrets)
        # Bytes as stored (UTF-8): a line of 65,000 emoji is 260,000 of them.
        size = utf8_size(message) + utf8_size(exc_text) + utf8_size(name)
        if self.size + size > self.max_bytes:
            self.dropped += 1
            return
        self.size += size
        # As emitted: the writer makes them storable (``storable.log_record``).
        self.records.append((record.created, record.levelno, name, message, exc_text))
        if self.flusher is not None and len(self.records) - self.flushed >= FLUSH_RECORDS:
            self.flusher.wake()

    def close(self):
        """End the attempt's capture: wait for a write in progress; from now on only the Outcome writes."""
        with self.lock:
            self.closed = True

    def rows(self):
        """Return the records not written yet as Outcome.logs rows, with the "dropped" line last when any were.

        They are numbered from ``base + flushed + 1`` (``Outcome.logs_before``).
        """
        rows = list(self.records[self.flushed :])
        if self.dropped:
            noun = "record" if self.dropped == 1 else "records"
            rows.append(
                (
                    time.time(),
                    logging.WARNING,
                    DROPPED_LOGGER,
                    f"{self.dropped} more {noun} dropped (at most {self.max_records} records "
                    f"and {self.max_bytes} bytes are kept per attempt)",
                    "",
                )
            )
        return tuple(rows)


_installed = False


def level():
    return SETTINGS["JOB_LOG_LEVEL"].check(conf.get("JOB_LOG_LEVEL"))


def install():
    """Keep records for running attempts from now on, in this process (the dispatcher's); idempotent.

    A record factory (``logging.setLogRecordFactory``) sees every record
    made, before any handler or propagation setting could keep it from the
    root logger, and gives it to the current attempt's Capture. The root
    logger's level drops to ``JOB_LOG_LEVEL`` if it was higher, so that the
    records a task emits at that level are made at all (Django's default
    logging puts no handler on the root logger; a project that does may give
    that handler a level of its own).
    """
    global _installed
    root = logging.getLogger()
    if not _installed:
        make = logging.getLogRecordFactory()

        def factory(*args, **kwargs):
            record = make(*args, **kwargs)
            capture = _current.get()
            if capture is not None:
                capture.add(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
    wanted = level()
    if wanted < root.getEffectiveLevel():
        root.setLevel(wanted)


def installed():
    return _installed


def stored(job, using="default"):
    """Return how many records attempt ``job.attempt`` of ``job`` already holds (0 but after a snooze).

    A snoozed run gives its attempt number back, so the next run has the
    same number: its records are numbered after the snoozed runs' (one
    query, only for a job that snoozed before).
    """
    if not job.snoozes:
        return 0
    from ..models import JobLog

    last = (
        JobLog.objects.using(using)
        .filter(job_id=job.id, attempt=job.attempt)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return last or 0


@contextlib.contextmanager
def capture(attempt=None, flusher=None, base=0, secrets=()):
    """Keep the current thread's (and context's) records while the block runs; yield the Capture.

    With a ``flusher`` (a ``logflush.LogFlusher``), the records of running
    ``attempt`` ``(job id, worker, attempt)`` are written while it runs; at
    the block's end the Capture is closed (a write in progress finishes
    first), so ``rows()`` then holds exactly what is left to write.
    Yields None when nothing is captured (no handler installed, or
    ``JOB_LOG_MAX_RECORDS`` is 0).
    """
    box, token = open_capture(attempt, flusher, base, secrets)
    if box is None:
        yield None
        return
    try:
        yield box
    finally:
        _current.reset(token)
        close_capture(box)


def open_capture(attempt=None, flusher=None, base=0, secrets=()):
    """Start keeping the current context's records: return ``(Capture, token)``, or ``(None, None)``.

    The two halves of :func:`capture`, for the asyncio lane, whose attempts
    share a thread: ``stop_capturing(token)`` in the attempt's own context,
    then ``close_capture`` (which may wait for a write) on a thread that can wait.
    """
    max_records = conf.get("JOB_LOG_MAX_RECORDS")
    if not _installed or not max_records:
        return None, None
    live = flusher if attempt is not None else None
    box = Capture(level(), max_records, conf.get("JOB_LOG_MAX_BYTES"), attempt, live, base, secrets)
    token = _current.set(box)
    if live is not None:
        live.add(box)
    return box, token


def stop_capturing(token):
    """Keep no more of this context's records (``token`` from :func:`open_capture`)."""
    _current.reset(token)


def close_capture_at_once(box):
    """Close ``box`` unless a write of its records is in progress; return whether it closed (else: ``close_capture``)."""
    if not box.lock.acquire(blocking=False):
        return False
    try:
        box.closed = True
    finally:
        box.lock.release()
    close_capture(box)  # closed already: only the flusher's bookkeeping is left, under its short lock
    return True


def close_capture(box):
    """Close ``box``: a write in progress ends first; from now on only the attempt's Outcome writes its records."""
    if box.flusher is not None:
        box.flusher.remove(box)
    else:
        box.close()
