"""Build a dispatcher wired to the database, and connect its wake-ups.

Used by ``manage.py rundispatcher`` and by tests that run a dispatcher on a
thread.
"""

import contextlib
import logging
import sys

from .. import conf, signals, sql
from ..dispatcher.loop import Dispatcher
from .executor import executor_for
from .store import DjangoStore, default_policy, new_worker_id


def retry_policy():
    """Return the retry policy the settings describe (RETRY_BACKOFF_*, RETRY_JITTER, RESULT_MAX_BYTES)."""
    return default_policy()


def create(
    groups, *, lease=None, using="default", clock=None, process_queues=(), async_queues=(), prewarm=False, **options
):
    """Return a Dispatcher over the database; unset options come from settings.SCHEDULER.

    Jobs of ``process_queues`` run in worker processes (``processes.py``);
    a slot group may mix them with thread queues (a worker process is
    started the first time such a job needs one). The ``async def`` tasks
    of ``async_queues`` run on one asyncio loop (``dispatcher/asyncio_lane.py``,
    ``async_executor.py``). With ``prewarm``, the
    worker processes of the slot groups that only run process queues start
    now, one per slot (``rundispatcher`` does; a dispatcher built only to
    check the options does not).
    """
    lease = lease or conf.get("LEASE")
    policy, executor = executor_for(using)
    thread_executor = executor
    store = DjangoStore(new_worker_id(), lease=lease, using=using, policy=policy)
    defaults = {
        "horizon": conf.get("HORIZON"),
        "cap": conf.get("HEAP_CAP"),
        "poll_interval": conf.get("POLL_INTERVAL"),
        "full_sync_interval": conf.get("FULL_SYNC_INTERVAL"),
        "sync_overlap": conf.get("SYNC_OVERLAP"),
        "grace": conf.get("GRACE"),
        "max_abandoned": conf.get("MAX_ABANDONED_THREADS"),
        "rollup_interval": conf.get("ROLLUP_INTERVAL"),
        # SQLite has no NOTIFY: a cheap check for other processes' commits.
        "change_check_interval": (conf.get("SQLITE_CHANGE_CHECK") if sql.dialect(using).checks_changes else None),
    }
    defaults.update({k: v for k, v in options.items() if v is not None})
    if process_queues:
        from django.conf import settings

        from .processes import ProcessExecutor, QueueRouter

        processes = ProcessExecutor(policy, settings.SETTINGS_MODULE, using, cancel_grace=conf.get("CANCEL_GRACE"))
        executor = QueueRouter(executor, processes, process_queues)
    lane, runner = _lane(executor, thread_executor, async_queues, lease)
    dispatcher = Dispatcher(store, groups, executor, lease=lease, clock=clock, policy=policy, **defaults)
    if lane is not None:
        dispatcher.async_queues = frozenset(async_queues)
        # Cancelled for real, and waited for, before the hand-back commits (the hand-back itself is the threads').
        dispatcher.before_release.append(lane.abort)
        dispatcher.on_exit += [lane.close, runner.close]
    if process_queues:
        dispatcher.process_queues = frozenset(process_queues)
        # Invariant 14: a released attempt's worker (and what its task started) is gone before the release.
        dispatcher.before_release.append(processes.abort)
        dispatcher.leases.on_lost.append(processes.stop_attempts)
        dispatcher.on_exit.append(executor.close)
        if prewarm:
            processes.prewarm(
                sum(slots for queues, slots in dispatcher.groups.values() if queues <= dispatcher.process_queues)
            )
    return dispatcher


def _lane(executor, thread_executor, async_queues, lease):
    """Give ``executor`` the asyncio lane of ``async_queues`` (the pool hands it what it takes).

    Return the lane and what it runs attempts with (None, None without such queues).
    """
    if not async_queues:
        return None, None
    from ..dispatcher.asyncio_lane import AsyncLane, abort_wait
    from .async_executor import AsyncExecutor

    runner = AsyncExecutor(thread_executor, async_queues)
    executor.lane = lane = AsyncLane(runner, runner.takes, wait=abort_wait(lease))
    return lane, runner


def uses_notify(using="default"):
    """Return whether other processes wake this dispatcher by NOTIFY (PostgreSQL)."""
    return sql.dialect(using).notifies


@contextlib.contextmanager
def wakeups(dispatcher, using="default"):
    """Connect in-process change signals and, on PostgreSQL, LISTEN (read by the loop thread), for the block's duration."""
    uid = f"dispatcher-{dispatcher.store.worker_id}"

    def on_local_change(sender, message, **kwargs):
        dispatcher.notify(message)

    signals.jobs_changed.connect(on_local_change, weak=False, dispatch_uid=uid)
    listener = waiter = None
    if uses_notify(using):
        from ..dispatcher.waiter import Waiter
        from .listener import LoopListener  # psycopg: only on PostgreSQL

        # The loop thread sleeps on the LISTEN socket itself (waiter.py).
        listener = LoopListener(dispatcher.notify, conf.get("NOTIFY_CHANNEL"), using=using)
        waiter = Waiter(listener)
        previous = dispatcher.listen_with(waiter)
        listener.start()
    try:
        yield listener
    finally:
        signals.jobs_changed.disconnect(dispatch_uid=uid)
        if listener:
            dispatcher.listen_with(previous)
            listener.stop()
            waiter.close()


# The dispatcher's lines when the project configured no logging for them (as Celery's worker prints its own).
CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def log_to_stderr_unless_configured(stream=None, app=None):
    """Give the ``scheduler_app`` logger a stderr handler at INFO when no handler would show its records.

    A fresh project configures no logging for the app: without this, the
    dispatcher's banner was its last word (no summaries, retries, failures
    or shutdown lines; Python's last resort shows WARNING and worse, bare).
    A handler on ``scheduler_app``, on one of its loggers, or on an ancestor
    its records reach (the root logger), means the project chose: nothing
    changes. A level the project set on ``scheduler_app`` is kept. Return
    the handler added, or None. (``app``: the logger, for tests.)
    """
    app = app or logging.getLogger("scheduler_app")
    node = app
    while node is not None:
        if node.handlers:
            return None
        node = node.parent if node.propagate else None
    for name, child in list(app.manager.loggerDict.items()):
        if name.startswith("scheduler_app.") and getattr(child, "handlers", None):
            return None
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(CONSOLE_FORMAT))
    app.addHandler(handler)
    if app.level == logging.NOTSET:
        app.setLevel(logging.INFO)
    return handler
