"""The claim step of ``Dispatcher.tick``: which due jobs to claim, for which free slots, and how.

A mixin of ``loop.Dispatcher`` (it uses the loop's timeline, pool, gate,
store and outcome buffer; loop thread only). Per slot group with free
slots: the window's best due jobs by id while this dispatcher is alone on
them; by query (the database picks, skipping rows others hold) when the
window may not hold the best ones or another dispatcher was seen taking
them; and, for a group with limited queues, one claim that obeys their
limits. Every claim also records the outcomes collected so far.
"""

from .timeline import SCHEDULES


class ClaimStep:
    # Seconds to claim by query after a claim by id came back short.
    CONTENTION_BACKOFF = 1.0

    def _claim_from_store(self, queues, limit, now, ids=None):
        outcomes = self.outcomes.pending
        jobs = self.store.claim(queues, limit, now, ids=ids, finished=outcomes, in_flight=self.pool.in_flight())
        if outcomes:
            self.outcomes.written(self.store, self.clock.time())
        return jobs

    def _claim_limited(self, group, queues, free, now):
        """Claim for a group with limited queues: one claim by query that obeys their limits."""
        outcomes = self.outcomes.pending
        jobs, full = self.store.claim_limited(queues, free, now, finished=outcomes, in_flight=self.pool.in_flight())
        if outcomes:
            self.outcomes.written(self.store, self.clock.time())
        self._start(group, jobs, now)
        for queue, until in full.items():
            self.gate.block(queue, until, now)
        if len(jobs) < free:
            # Queues with room had fewer due jobs than the window thought.
            self.timeline.drop_due(group, skip=self.paused | self.gate.blocked(now))

    def _claim(self, now):
        if self.max_jobs is not None and self.claimed_total >= self.max_jobs:
            return
        due_groups = self.timeline.promote(now)
        # Let the database choose which due jobs run when the window may not
        # hold the best of them: it hit its cap, or (burst mode) it is empty.
        by_query = self.timeline.truncated or now < self._contended_until
        if self.burst and not due_groups and self.pool.busy() == 0:
            due_groups = set(self.groups) | {SCHEDULES}
            by_query = True
        if SCHEDULES in due_groups:
            due_groups.discard(SCHEDULES)
            self._materialize(now)
        for group in due_groups:
            free = self.pool.free(group)
            if self.max_jobs is not None:
                free = min(free, self.max_jobs - self.claimed_total)
            if free <= 0:
                continue
            queues = self.groups[group][0] - self.paused
            blocked = self.gate.blocked(now) & queues
            open_limited = (queues & self.gate.limited) - blocked
            if open_limited and (by_query or self.timeline.has_due(only=open_limited)):
                self._claim_limited(group, queues - blocked, free, now)
                continue
            # Limited queues are left to the claim above.
            limited = self.gate.limited
            queues -= limited
            if not queues:
                continue
            if not by_query:
                # The window's best due jobs, claimed by id: cheap and exact
                # while this dispatcher is alone on them.
                entries = self.timeline.take_due(group, free, skip=self.paused | limited)
                if entries:
                    # A job still running here may be pending again (a rescue
                    # after an outage, a retry of an attempt that timed out
                    # while its thread runs on): never claimed twice at once by
                    # its own dispatcher. It waits until its thread is done.
                    running = self.pool.in_flight()
                    if any(e.id in running for e in entries):
                        self._held.update((e.id, e) for e in entries if e.id in running)
                        entries = [e for e in entries if e.id not in running]
                if not entries:
                    continue
                try:
                    claimed = self._claim_from_store(queues, len(entries), now, ids=[e.id for e in entries])
                except self.store.transient_errors:
                    for entry in entries:
                        self.timeline.upsert(entry)
                    raise
                free -= len(self._start(group, claimed, now))
                if len(claimed) == len(entries) or free <= 0:
                    continue
                self._contended_until = now + self.CONTENTION_BACKOFF
                # Some were gone (another dispatcher won them, or they were
                # cancelled or moved): let the database pick the next ones,
                # skipping rows other dispatchers hold.
            jobs = self._start(group, self._claim_from_store(queues, free, now), now)
            if len(jobs) < free:
                # The database has fewer due jobs than the window thought.
                self.timeline.drop_due(group, skip=limited)

    def _release_held(self):
        """Give the window back the entries held while their jobs still ran here."""
        running = self.pool.in_flight()
        for job_id in [i for i in self._held if i not in running]:
            self.timeline.upsert(self._held.pop(job_id))

    def _start(self, group, jobs, now):
        if jobs:
            self.leases.claimed(now)
        for job in jobs:
            self.timeline.remove(job.id)
            if self.rollups is not None:
                self.rollups.started(job, now)
        self.pool.submit_many(group, jobs)
        self.claimed_total += len(jobs)
        return jobs

    def _materialize(self, now):
        """Turn due schedules into jobs (the store's compare-and-set decides who does)."""
        ids = [-i for i in self.timeline.due_ids(SCHEDULES)]
        self.timeline.drop_due(SCHEDULES)
        for entry in self.store.materialize(now, ids):
            self.window.apply(entry)
