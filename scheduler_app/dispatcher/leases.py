"""The leases of the attempts a dispatcher runs: when they run out, and stopping those it could not renew.

Loop thread only. A lease lets another dispatcher take a job back once it
expires (invariant 6); an attempt still running here after that could be a
second run of the job at once (invariant 14). So the loop renews the leases
of the attempts it still runs (not of the outcomes it could not write,
invariant 13), and when a renewal could not happen in time (the database is
unreachable) it stops those attempts before their leases expire: their
threads get the cancel flag, and ``on_lost`` callables stop worker processes
hard. Their outcomes become "lost" failures, retried like a rescue's,
unless they succeeded.
"""

import logging
from datetime import UTC, datetime

from ..vocabulary.jobs import Status
from ..vocabulary.policy import LEASE_EXPIRED_CLASS, error_entry

logger = logging.getLogger(__name__)

# Running attempts are stopped when this fraction of the lease is left
# unrenewed: another dispatcher's rescue may come once it expires.
LEASE_MARGIN = 0.1
LEASE_STOPPED_MESSAGE = (
    "Stopped: this dispatcher could not renew the attempt's lease (database unavailable), "
    "so another dispatcher may take the job back."
)
NOT_STARTED_MESSAGE = (
    "Not started: the attempt's lease had run out before a worker could start it (was the dispatcher paused?); "
    "another dispatcher may have taken the job back."
)


class LeaseWatch:
    def __init__(self, lease, pool, policy):
        self.lease = lease
        self.pool = pool
        self.policy = policy
        # When the earliest lease of an attempt in flight runs out, as far as
        # this dispatcher knows (its last renewal, or its first claim since).
        self.until = None
        self.lost = set()  # ids of attempts stopped because their leases ran out
        self.on_lost = []  # callables given those attempts (ClaimedJobs)
        # Callables given ``(until, lease)`` whenever ``until`` moves (None: nothing in flight): the guardian.
        self.on_until = []

    def _moved(self, until):
        if until != self.until:
            self.until = until
            for tell in self.on_until:
                tell(until, self.lease)

    def claimed(self, now):
        """Attempts were claimed at ``now``: their leases run until ``now + lease`` at least."""
        if self.until is None:
            self._moved(now + self.lease)

    def renewed(self, now, running):
        """The leases of ``running`` (ids) were renewed at ``now``."""
        self._moved(now + self.lease if running else None)

    def idle(self):
        """Nothing is in flight any more: no lease to watch until the next claim."""
        if self.until is not None:
            self._moved(None)

    def refuse(self, job, now):
        """Return the lost Outcome of ``job`` if its lease ran out (as far as this dispatcher knows) before it
        started, else None. Any thread: what a worker asks right before it starts the attempt (invariant 14).

        Its lease ran at least until its claim's time plus the lease; a
        dispatcher paused past that may have lost the job to a rescue.
        """
        if job.last_attempted_at.timestamp() + self.lease * (1 - LEASE_MARGIN) > now:
            return None
        logger.warning(
            "job %s: not started, its lease ran out before a worker could start it",
            job.id,
            extra={"job_id": job.id, "action": "lease_lost"},
        )
        moment = datetime.fromtimestamp(now, UTC)
        error = error_entry(
            job, exception_class=LEASE_EXPIRED_CLASS, message=NOT_STARTED_MESSAGE, traceback_text="", now=moment
        )
        return self.policy.failed(job, error, moment)

    def moment(self):
        """Return when the attempts in flight must stop unless renewed by then (None: nothing runs)."""
        if self.until is None or not self.pool.busy():
            return None
        return self.until - self.lease * LEASE_MARGIN

    def check(self, now):
        """Stop the attempts whose leases could not be renewed in time."""
        moment = self.moment()
        if moment is None or now < moment:
            return
        jobs = [job for job in self.pool.running_jobs() if job.id not in self.lost]
        if not jobs:
            return
        logger.warning(
            "could not renew the leases of %d running jobs before they expire: stopping them",
            len(jobs),
            extra={"action": "lease_lost"},
        )
        self.lost.update(job.id for job in jobs)
        self.pool.request_cancel([job.id for job in jobs])
        self.stop(jobs)

    def stop(self, jobs):
        """Stop ``jobs`` hard where their executor can (worker processes)."""
        for stop in self.on_lost:
            stop(jobs)

    def ended(self, ended, moment):
        """Return ``[(job, outcome to record)]`` for the pool's ``[(job, outcome, error)]`` of attempts that ended:
        an executor that raised gives the policy's outcome for it, and ``outcome`` below applies."""
        lost, raised = self.lost, self.policy.raised
        return [
            (job, outcome)
            if outcome is not None and not (lost and job.id in lost)
            else (job, self.outcome(job, raised(job, error, moment) if outcome is None else outcome, moment))
            for job, outcome, error in ended
        ]

    def outcome(self, job, outcome, moment):
        """Return the outcome to record for ``job``: a "lost" failure if it was stopped here and did not succeed."""
        if not self.lost or job.id not in self.lost:
            return outcome
        self.lost.discard(job.id)
        if outcome.status == Status.SUCCEEDED:
            return outcome
        error = error_entry(
            job, exception_class=LEASE_EXPIRED_CLASS, message=LEASE_STOPPED_MESSAGE, traceback_text="", now=moment
        )
        return self.policy.failed(job, error, moment)
