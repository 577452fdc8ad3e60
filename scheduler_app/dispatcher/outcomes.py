"""The loop's outcome buffer: attempts that ended, until the database has them.

Loop thread only. The worker threads hand outcomes to the pool; the loop
collects them here and writes them with its next claim (one round trip on
PostgreSQL) or on their own. A write that fails leaves them here for the
next one. The buffer also counts them, feeds the rollups, and remembers the
limited queues they free: room in such a queue exists for the other
dispatchers only once the outcome is written, so they are told then.
"""

from ..vocabulary.jobs import Status


class OutcomeBuffer:
    def __init__(self, gate, rollups=None):
        self.gate = gate
        self.rollups = rollups
        self.pending = []  # written by the next finish(), kept across database errors
        self._freed = set()  # limited queues of those outcomes
        self.processed = 0
        self.failed = 0

    def add(self, job, outcome, now):
        """Keep ``outcome`` of ``job`` until it is written (see ``add_many``)."""
        self.add_many(((job, outcome),), now)

    def add_many(self, ended, now):
        """Keep each ``(job, outcome)`` of ``ended``, in order, until written: counted, in the rollups,
        and the slots of limited queues freed on the gate."""
        if self.rollups is not None:
            self.rollups.finished_many(ended, now)
        pending, limited, failed = self.pending, self.gate.limited, Status.FAILED
        for job, outcome in ended:
            pending.append(outcome)
            if limited and job.queue in limited:
                # Its slot of the queue's concurrency frees when the outcome is written.
                self._freed.add(job.queue)
                self.gate.free([job.queue], only_concurrency=True)
            if outcome.status == failed:
                self.failed += 1
        self.processed += len(ended)

    def written(self, store, now):
        """The outcomes are in the database: forget them, and tell whom it concerns that room freed."""
        self.pending = []
        if self._freed:
            freed, self._freed = self.gate.to_tell(self._freed, now), set()
            if freed:
                store.notify_freed(freed)
