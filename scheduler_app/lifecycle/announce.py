"""Tell dispatchers what changed: a NOTIFY on commit (PostgreSQL) and a signal in-process.

The message is a :class:`~scheduler_app.vocabulary.wakeup.WakeUp`; this
module only sends it. On PostgreSQL the NOTIFY is queued inside the current
transaction, so it is delivered exactly when the change commits (and not at
all when it rolls back); the in-process ``jobs_changed`` signal is sent from
``transaction.on_commit`` for the same reason.
"""

from django.db import transaction

from .. import conf, signals, sql
from ..models import Job
from ..vocabulary.wakeup import WakeUp


def job_item(job):
    """Return a pending job's entry in a WakeUp: (id, execute_at epoch, priority, queue[, 1 when it has a key])."""
    item = (job.pk, job.execute_at.timestamp(), job.priority, job.queue)
    return item + (1,) if job.concurrency_key else item


def announce(*, jobs=(), items=(), removed=(), cancel=(), queues=(), freed=(), queues_changed=False, using="default"):
    """Tell dispatchers, after commit, that jobs were added, changed or removed.

    ``jobs`` are Job instances now pending (new or rescheduled), ``items``
    the same as ``(id, execute_at epoch, priority, queue)``; ``removed``
    are ids no longer pending; ``cancel`` are running jobs whose cancel was
    requested; ``freed`` are limited queues where running jobs ended;
    ``queues_changed`` says a queue was paused or resumed, or its limits changed.
    """
    message = WakeUp.of(
        jobs=[job_item(j) for j in jobs] + [tuple(i) for i in items],
        removed=removed,
        cancel=cancel,
        queues=queues,
        freed=freed,
        queues_changed=queues_changed,
    )
    send(message, using)


def announce_schedules(entries, *, using="default"):
    """Tell dispatchers, after commit, that schedules changed.

    ``entries`` are ``(schedule_id, next_run epoch or None)``; None means the
    schedule has nothing to run (disabled, ended or deleted).
    """
    entries = list(entries)
    if entries:
        send(WakeUp.of(schedules=entries), using)


def send(message, using="default"):
    """Queue the NOTIFY (PostgreSQL) in the current transaction; signal in-process after commit."""
    tell_others(message, using)
    signal_after_commit(message, using)


def tell_others(message, using="default"):
    """Send ``message`` to the other processes only (a NOTIFY on PostgreSQL; nothing elsewhere)."""
    sql.notify(conf.get("NOTIFY_CHANNEL"), message.encode(), using=using)


def signal_after_commit(message, using="default"):
    """Send ``jobs_changed`` in this process once the current transaction commits."""
    transaction.on_commit(lambda: signals.jobs_changed.send(sender=Job, message=message), using=using)
