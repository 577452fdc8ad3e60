"""The dispatcher's database side: ``protocol.Store`` done with the ORM and SQL.

Transitions go through ``scheduler_app.lifecycle`` (the one place that
changes job status); this module adds the reads the loop needs (window,
changes) and this dispatcher's Worker row (one row per dispatcher process;
the model keeps its public name). It runs on the loop thread only.
"""

import logging
import os
import socket
import time
import uuid
from datetime import UTC, datetime

from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone

from .. import conf, lifecycle, maintenance, registry, schedules, sql
from ..dispatcher.timeline import Entry, schedule_entry
from ..models import Job, Worker, WorkerState
from ..observability import rollups
from ..sql import connections as pg
from ..sql import liveness
from ..vocabulary.claims import KEYED, LIMITED, PLAIN, ClaimRequest
from ..vocabulary.policy import RetryPolicy
from ..vocabulary.wakeup import WakeUp

logger = logging.getLogger(__name__)

# A read of at least this many pending rows asks whether the table outgrew its
# statistics (``DjangoStore._check_statistics``), at most once per interval (s).
STATISTICS_CHECK_ROWS = 1000
STATISTICS_CHECK_INTERVAL = 10.0


def to_datetime(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def default_policy():
    """Return the retry policy the settings describe (RETRY_BACKOFF_*, RETRY_JITTER, task options)."""
    return RetryPolicy(
        base=conf.get("RETRY_BACKOFF_BASE"),
        cap=conf.get("RETRY_BACKOFF_MAX"),
        jitter=conf.get("RETRY_JITTER"),
        task_options=registry.options_for,
        max_snoozes=conf.get("MAX_SNOOZES"),
        result_max_bytes=conf.get("RESULT_MAX_BYTES"),
    )


def new_worker_id():
    """Return a new dispatcher id (the key of its Worker row): host, pid, a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class DjangoStore:
    transient_errors = (OperationalError, InterfaceError, *pg.TRANSIENT_ERRORS)

    def __init__(self, worker_id, *, lease, using="default", prune=True, policy=None):
        self.worker_id = worker_id
        self.lease = lease
        self.using = using
        self.prune = prune
        # When a rescued attempt runs again: the task's backoff.
        self.policy = policy or default_policy()
        # PostgreSQL: a connection of the loop's own for claims and finishes,
        # where they run as one prepared statement. Loop thread only.
        self._raw = None
        self._dialect = sql.dialect(using)
        self._data_version = None  # SQLite: PRAGMA data_version last seen
        self._statistics_checked = -STATISTICS_CHECK_INTERVAL  # monotonic time of the last check
        self._liveness = None  # sql.liveness.Liveness from register() to retire(); any thread may retire
        self._maintenance = None  # maintenance.Maintenance, made at the first maintain() (loop thread only)

    def _hot_connection(self):
        """PostgreSQL: the loop's own connection for claims and finishes (``sql.connections.hot``); None elsewhere."""
        if self._raw is None or self._raw.closed:
            self._raw = self._dialect.hot_connection(self.using, synchronous_commit=conf.get("SYNCHRONOUS_COMMIT"))
        return self._raw

    # -- this dispatcher's Worker row --------------------------------------

    def register(self, *, queues, slots):
        # Held until nothing of this dispatcher runs (``retire``), or its process ends: what it hands back
        # at shutdown is taken back only then (``lifecycle.take_back``).
        if self._liveness is None:
            self._liveness = liveness.Liveness(self.worker_id, self.using)
        # Queues seen for the first time get their row (and limits) from the settings.
        lifecycle.ensure_queues(queues, using=self.using)
        now = timezone.now()
        Worker.objects.using(self.using).update_or_create(
            id=self.worker_id,
            defaults={
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "queues": sorted(queues),
                "slots": dict(slots),
                "state": WorkerState.ALIVE,
                "lease_seconds": self.lease,
                "started_at": now,
                "last_heartbeat": now,
            },
        )

    def heartbeat(self, now, *, running, processed, failed):
        Worker.objects.using(self.using).filter(id=self.worker_id).update(
            last_heartbeat=to_datetime(now),
            state=WorkerState.ALIVE,
            running=running,
            processed=processed,
            failed=failed,
        )

    def unregister(self, *, processed, failed):
        if self._maintenance is not None:
            self._maintenance.resign(time.time())  # the next dispatcher to look leads at once
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        Worker.objects.using(self.using).filter(id=self.worker_id).update(
            state=WorkerState.STOPPED, stopped_at=timezone.now(), running=0, processed=processed, failed=failed
        )

    def reset(self):
        """Drop broken connections so the next query reconnects."""
        self._data_version = None
        try:
            connections[self.using].close()
        except Exception:  # closing a dead connection may raise; it is gone either way
            logger.debug("error closing a broken connection", exc_info=True)
        if self._raw is not None:
            try:
                self._raw.close()
            except Exception:
                logger.debug("error closing a broken connection", exc_info=True)
            self._raw = None

    # -- reads -------------------------------------------------------------

    def data_changed(self):
        """SQLite: whether another connection committed since the last call.

        ``PRAGMA data_version`` reads a counter in shared memory: no I/O, so
        the loop can ask every few milliseconds and find an enqueue made by
        the web server long before its change poll would. True after a
        reconnect (the counter is per connection). Always True elsewhere.
        """
        version = self._dialect.data_version(self.using)
        if version is None:
            return True
        changed = version != self._data_version
        self._data_version = version
        return changed

    def load_window(self, queues, until, limit):
        """Return the window: the next runs of schedules first, then pending jobs by time.

        Schedules come first so that a full window of jobs never pushes them
        out; the loop takes the last entry as the edge of a truncated window.
        """
        planned = [schedule_entry(i, at) for i, at in schedules.window(until, using=self.using)]
        planned = planned[: max(limit // 2, 1)]
        rows = list(
            Job.objects.using(self.using)
            .pending()
            .filter(queue__in=sorted(queues), execute_at__lte=to_datetime(until))
            .order_by("execute_at", "id")
            .annotate(at=sql.Epoch("execute_at"))
            .values_list("id", "at", "priority", "queue", "concurrency_key")[: limit - len(planned)]
        )
        self._check_statistics(len(rows))
        return planned + [Entry(i, at, p, q, k is not None) for i, at, p, q, k in rows if at is not None]

    def _check_statistics(self, seen):
        """PostgreSQL: after reading ``seen`` pending rows, have the table analysed if its statistics say fewer.

        The loop's statements were planned from the statistics of their
        first run (``_hot_connection``); a bulk enqueue into a table that was
        small then leaves them planned for a small table until autovacuum
        analyses it (``Dialect.analyze_if_outgrown``). Asked only after a
        large read, at most every ``STATISTICS_CHECK_INTERVAL`` seconds.
        """
        if seen < STATISTICS_CHECK_ROWS:
            return
        now = time.monotonic()
        if now - self._statistics_checked < STATISTICS_CHECK_INTERVAL:
            return
        self._statistics_checked = now
        if self._dialect.analyze_if_outgrown(seen, using=self.using):
            logger.info("analysed the jobs table: %d pending rows read, more than its statistics held", seen)

    def changes(self, queues, since, limit=None):
        """Return the pending jobs and schedules changed since ``since``.

        A schedule with nothing to run has an entry with ``at=None``. When
        more than ``limit`` jobs changed, return None: the caller reloads
        its window instead (reading a bulk enqueue in full at every poll
        costs the dispatcher its memory and its time, where a reload reads
        only the window).
        """
        entries = [schedule_entry(i, at) for i, at in schedules.changes(since, using=self.using)]
        rows = (
            Job.objects.using(self.using)
            .pending()
            .filter(queue__in=sorted(queues), updated_at__gte=to_datetime(since))
            .annotate(at=sql.Epoch("execute_at"))
            .values_list("id", "at", "priority", "queue", "concurrency_key")
        )
        if limit is not None:
            rows = list(rows[: limit + 1])
            if len(rows) > limit:
                return None  # the reload that follows checks the statistics
            self._check_statistics(len(rows))
        # SQLite text that is not a time is never due, never claimed: no entry.
        entries.extend(Entry(i, at, p, q, k is not None) for i, at, p, q, k in rows if at is not None)
        return entries

    def cancel_requests(self):
        return set(
            Job.objects.using(self.using)
            .running()
            .filter(worker=self.worker_id, cancel_requested=True)
            .values_list("id", flat=True)
        )

    def paused_queues(self):
        return lifecycle.paused_queues(using=self.using)

    def limited_queues(self):
        return lifecycle.limited_queues(using=self.using)

    def any_due(self, queues, now):
        return sql.any_due(queues, to_datetime(now), using=self.using)

    # -- transitions (through the lifecycle) -------------------------------

    def _claim(self, kind, queues, limit, now, finished, in_flight, ids=None):
        request = ClaimRequest(
            self.worker_id, tuple(queues), limit, self.lease, to_datetime(now), kind=kind, ids=ids, in_flight=in_flight
        )
        return lifecycle.claim(request, finished=finished, connection=self._hot_connection(), using=self.using)

    def claim(self, queues, limit, now, ids=None, finished=(), in_flight=()):
        return self._claim(PLAIN, queues, limit, now, finished, in_flight, ids=None if ids is None else tuple(ids)).jobs

    def claim_limited(self, queues, limit, now, finished=(), in_flight=()):
        claimed = self._claim(LIMITED, queues, limit, now, finished, in_flight)
        return claimed.jobs, claimed.blocked

    def claim_keyed(self, queues, limit, now, finished=(), in_flight=()):
        claimed = self._claim(KEYED, queues, limit, now, finished, in_flight)
        return claimed.jobs, claimed.held

    def notify_freed(self, queues):
        # Other processes only: this loop freed its own gate already.
        lifecycle.tell_others(WakeUp.of(freed=sorted(queues)), using=self.using)

    def materialize(self, now, ids=()):
        """Enqueue the jobs of due schedules; return their entries (``at=None``: none left)."""
        planned = schedules.materialize_due(to_datetime(now), ids=ids, using=self.using)
        return [schedule_entry(i, at) for i, at in planned]

    def finish(self, outcomes, now):
        return set(
            lifecycle.finish(outcomes, now=to_datetime(now), connection=self._hot_connection(), using=self.using)
        )

    def renew(self, now, ids=None):
        return lifecycle.renew_leases(self.worker_id, lease=self.lease, now=to_datetime(now), ids=ids, using=self.using)

    def rescue(self, now):
        # Rescued jobs are announced by the lifecycle; this process hears it too.
        return lifecycle.rescue_expired(now=to_datetime(now), retry_at=self.policy.retry_at, using=self.using)

    def expire(self, now):
        return lifecycle.expire_due(now=to_datetime(now), using=self.using)

    def release(self, jobs, now):
        if self._liveness is not None:
            self._liveness.ensure()  # held, or nothing tells the others that its threads still run
        return lifecycle.release(
            self.worker_id, [(job.id, job.attempt) for job in jobs], now=to_datetime(now), using=self.using
        )

    def take_back(self, now):
        return lifecycle.take_back(now=to_datetime(now), using=self.using)

    def retire(self):
        if self._liveness is not None:
            self._liveness.close()

    def write_rollups(self, tallies, now, *, samples=True):
        rollups.record(tallies, to_datetime(now), samples=samples, using=self.using)

    def maintain(self, now, *, housekeeping_interval):
        if self._maintenance is None:
            found = maintenance.services(
                lease=self.lease,
                policy=self.policy,
                housekeeping_interval=housekeeping_interval,
                prune=self.prune,
                using=self.using,
            )
            self._maintenance = maintenance.Maintenance(
                self.worker_id, lease=self.lease, services=found, using=self.using
            )
        return self._maintenance.run(now)

    @property
    def leads(self):
        """Whether this dispatcher leads the maintenance (as of its last ``maintain``)."""
        return self._maintenance is not None and self._maintenance.leads
