"""Per-job logs: keep the log records a job's own thread emits while it runs.

One handler on the root logger (:func:`install`, by the dispatcher) keeps a
record only when the thread that emits it is running an attempt: the
executor opens a :class:`Capture` around the task call and the handler finds
it through a context variable (so a worker thread sees only its own job's,
and an ``async`` task's records, run by asgiref on its loop's thread with
the caller's context, count too). Records of the scheduler's own loggers
and of ``django.tasks`` are not kept: they describe the attempt, they are
not the task's.

Bounded per attempt (``JOB_LOG_MAX_RECORDS``, ``JOB_LOG_MAX_BYTES``): past
either, records are counted, and one "N more records dropped" line ends
the attempt's log. The records travel in the attempt's Outcome and are
written by the statement that records it (``sql``), never one by one.
"""

import contextlib
import contextvars
import logging
from datetime import UTC, datetime

from . import conf
from .settings_rules import SETTINGS

# The scheduler's own loggers and Django's task log describe the attempt;
# its built-in and demo tasks log as tasks do.
OWN = ("scheduler_app", "django.tasks")
TASK_MODULES = ("scheduler_app.tasks", "scheduler_app.demo")
DROPPED_LOGGER = "scheduler_app.joblogs"
_current = contextvars.ContextVar("scheduler_job_capture", default=None)
_formatter = logging.Formatter()


def clean_text(text):
    """Return ``text`` as both databases store it: no NUL, no lone surrogate."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def is_own(name):
    """Return whether logger ``name`` is the scheduler's or ``django.tasks`` (not kept with jobs)."""
    if not name.startswith(OWN) or name.startswith(TASK_MODULES):
        return False
    return name in OWN or name.startswith(("scheduler_app.", "django.tasks."))


class Capture:
    """The records of one attempt, in the order they were emitted."""

    __slots__ = ("level", "max_records", "max_bytes", "records", "size", "dropped")

    def __init__(self, level, max_records, max_bytes):
        self.level = level
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records = []
        self.size = 0
        self.dropped = 0

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
        except Exception as exc:  # a bad %-format in the task's own call
            message = f"{record.msg!r} (could not format: {type(exc).__name__})"
        exc_text = _formatter.formatException(record.exc_info) if record.exc_info else ""
        size = len(message) + len(exc_text) + len(name)
        if self.size + size > self.max_bytes:
            self.dropped += 1
            return
        self.size += size
        moment = datetime.fromtimestamp(record.created, UTC).isoformat()
        self.records.append((moment, record.levelno, clean_text(name[:255]), clean_text(message), clean_text(exc_text)))

    def rows(self):
        """Return the records as Outcome.logs rows, with the "dropped" line last when any were."""
        rows = list(self.records)
        if self.dropped:
            noun = "record" if self.dropped == 1 else "records"
            rows.append(
                (datetime.now(UTC).isoformat(), logging.WARNING, DROPPED_LOGGER,
                 f"{self.dropped} more {noun} dropped (at most {self.max_records} records "
                 f"and {self.max_bytes} bytes are kept per attempt)", "")
            )
        return tuple(rows)


class JobLogHandler(logging.Handler):
    """On the root logger: hands each record to the emitting thread's Capture, if it has one.

    Installing it lowered the root logger's level so that a task's INFO
    records are made at all; it gives every other handler only what it got
    before (``floor``), and plays Python's last-resort handler for records
    that found no other handler, as if it were not there.
    """

    def __init__(self, floor):
        super().__init__(logging.NOTSET)
        self.floor = floor  # the root logger's level before install()

    def handle(self, record):
        capture = _current.get()
        if capture is not None:
            capture.add(record)
        last_resort = logging.lastResort
        if last_resort is not None and record.levelno >= max(last_resort.level, self.floor) and not _other_handlers(record.name, self):
            last_resort.handle(record)
        return True

    def emit(self, record):  # handle() does the work
        pass


def _other_handlers(name, mine):
    logger = logging.getLogger(name)
    while logger is not None:
        if any(h is not mine for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


class _FloorFilter(logging.Filter):
    """Keeps a handler to the records the root logger let through before install()."""

    def __init__(self, floor):
        super().__init__()
        self.floor = floor

    def filter(self, record):
        return record.levelno >= self.floor


_handler = None


def level():
    return SETTINGS["JOB_LOG_LEVEL"].check(conf.get("JOB_LOG_LEVEL"))


def install():
    """Put the capturing handler on the root logger (once per process); return it.

    The root logger's level drops to ``JOB_LOG_LEVEL`` if it was higher, so
    the records a task emits below it exist at all; handlers already on the
    root logger are filtered back to the level it had (every later call
    lowers it again if the setting asks for less).
    """
    global _handler
    root = logging.getLogger()
    if _handler is None:
        floor = root.getEffectiveLevel()
        for handler in root.handlers:
            handler.addFilter(_FloorFilter(floor))
        _handler = JobLogHandler(floor)
        root.addHandler(_handler)
    wanted = level()
    if wanted < root.getEffectiveLevel():
        root.setLevel(wanted)
    return _handler


def installed():
    return _handler is not None


@contextlib.contextmanager
def capture():
    """Keep the current thread's (and context's) records while the block runs; yield the Capture.

    Yields None when nothing is captured (no handler installed, or
    ``JOB_LOG_MAX_RECORDS`` is 0).
    """
    max_records = conf.get("JOB_LOG_MAX_RECORDS")
    if _handler is None or not max_records:
        yield None
        return
    box = Capture(level(), max_records, conf.get("JOB_LOG_MAX_BYTES"))
    token = _current.set(box)
    try:
        yield box
    finally:
        _current.reset(token)
