"""The claim step of ``Dispatcher.tick``: which due jobs to claim, for which free slots, and how.

A collaborator of ``loop.Dispatcher``, given the loop's parts it uses
(``Claimer.PARTS``, by name); loop thread only. Per slot group with free slots: the window's
best due jobs by id while this dispatcher is alone on them; by query (the
database picks, skipping rows others hold) when the window may not hold the
best ones or another dispatcher was seen taking them; and, for a group with
limited queues, one claim that obeys their limits; for a group whose window
holds a due job with a concurrency key, the keyed claim (the database counts
each key's running jobs), after which a group whose keys are all at their
limit waits for a change (a job ending) instead of asking again. Every claim also records
the outcomes collected so far (``outcomes``), and never takes a job this
dispatcher still runs (``pool.in_flight()``).
"""

from .timeline import SCHEDULES


class Claimer:
    # Seconds to claim by query after a claim by id came back short.
    CONTENTION_BACKOFF = 1.0

    # The loop's parts the claim step works with: ``parts`` has them as attributes
    # of these names (the Dispatcher; a test's harness). Loop thread only.
    PARTS = ("timeline", "window", "pool", "gate", "outcomes", "leases", "clock", "rollups")

    def __init__(self, store, groups, parts, *, max_jobs=None, burst=False):
        self.store = store
        self.groups = groups  # slot group -> (queues, slots)
        for name in self.PARTS:
            setattr(self, name, getattr(parts, name))
        self.max_jobs = max_jobs
        self.burst = burst
        self.claimed_total = 0
        # Until then, claim by query: another dispatcher was seen taking the
        # same due jobs, so claiming the window's ids would mostly miss.
        self.contended_until = 0.0
        self.held = {}  # job id -> Entry: due, but its job still runs here (released by release_held)
        # group -> until when its keyed jobs wait: the last keyed claim found
        # their keys at their limits. Cleared by keys_changed (a job ended).
        self.keys_blocked = {}

    def done(self):
        """Return whether ``max_jobs`` were claimed."""
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs

    def claim(self, now, paused):
        """Claim for every slot group with free slots and due jobs; ``paused``: the queues not to claim from."""
        if self.done():
            return
        due_groups = self.timeline.promote(now)
        # Let the database choose which due jobs run when the window may not
        # hold the best of them: it hit its cap, or (burst mode) it is empty.
        by_query = self.timeline.truncated or now < self.contended_until
        if self.burst and not due_groups and self.pool.busy() == 0:
            due_groups = set(self.groups) | {SCHEDULES}
            by_query = True
        if SCHEDULES in due_groups:
            due_groups.discard(SCHEDULES)
            self._materialize(now)
        keyed = {g for g in self.timeline.keyed_due(now) if self.keys_blocked.get(g, 0.0) <= now}
        for group in keyed:
            free = self._free(group)
            if free > 0:
                self._claim_keyed(group, free, now, paused)
        for group in due_groups:
            free = self._free(group)
            if free > 0:
                self._claim_group(group, free, now, paused, by_query)

    def _free(self, group):
        free = self.pool.free(group)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed_total)
        return free

    def _claim_keyed(self, group, free, now, paused):
        """Claim for a group whose window holds due keyed jobs: the keyed claim, then jobs without a key by query.

        The outcomes are written in the claim's transaction, before it counts
        a key's running jobs. When keys held jobs back, the group's keyed
        jobs wait until a job ends (``keys_changed``) or ``retry_interval``.
        """
        queues = self.groups[group][0] - paused  # limited queues too: the keyed claim obeys their limits
        if not queues:
            return
        outcomes = self.outcomes.pending
        jobs, held = self.store.claim_keyed(queues, free, now, finished=outcomes, in_flight=self.pool.in_flight())
        if outcomes:
            self.outcomes.written(self.store, self.clock.time())
        self._start(group, jobs, now)
        if held:
            self.keys_blocked[group] = now + self.gate.retry_interval
        if len(jobs) < free:
            if not held:
                self.timeline.drop_keyed_due(group, now)
            # The claim took every due job without a key it could: the rest are stale.
            self.timeline.drop_due(group, skip=paused | self.gate.limited)

    def keys_changed(self):
        """A job ended (here or elsewhere): keys may have room again."""
        self.keys_blocked.clear()

    def next_moment(self, now):
        """Return when the keyed jobs of the window next need a claim (a block ends, one comes due), or None."""
        blocked = {g for g, until in self.keys_blocked.items() if until > now}
        moments = [self.keys_blocked[g] for g in blocked]
        at = self.timeline.keyed_next_at(now, skip=blocked)
        if at is not None:
            moments.append(at)
        return min(moments) if moments else None

    def _claim_group(self, group, free, now, paused, by_query):
        queues = self.groups[group][0] - paused
        blocked = self.gate.blocked(now) & queues
        open_limited = (queues & self.gate.limited) - blocked
        if open_limited and (by_query or self.timeline.has_due(only=open_limited)):
            self._claim_limited(group, queues - blocked, free, now, paused)
            return
        # Limited queues are left to the claim above.
        limited = self.gate.limited
        queues -= limited
        if not queues:
            return
        if not by_query:
            free = self._claim_by_ids(group, queues, free, now, skip=paused | limited)
            if free is None:
                return
        jobs = self._start(group, self._from_store(queues, free, now), now)
        if len(jobs) < free:
            # The database has fewer due jobs than the window thought.
            self.timeline.drop_due(group, skip=limited)

    def _claim_by_ids(self, group, queues, free, now, skip):
        """Claim the window's best due jobs by id; return the slots left to claim by query, or None: done.

        Cheap and exact while this dispatcher is alone on them. A job still
        running here may be pending again (a rescue after an outage, a retry
        of an attempt that timed out while its thread runs on): it is held
        until its thread is done, never claimed twice at once here.
        """
        entries = self.timeline.take_due(group, free, skip=skip)
        if entries:
            running = self.pool.in_flight()
            if any(e.id in running for e in entries):
                self.held.update((e.id, e) for e in entries if e.id in running)
                entries = [e for e in entries if e.id not in running]
        if not entries:
            return None
        try:
            claimed = self._from_store(queues, len(entries), now, ids=[e.id for e in entries])
        except self.store.transient_errors:
            for entry in entries:
                self.timeline.upsert(entry)
            raise
        free -= len(self._start(group, claimed, now))
        if len(claimed) == len(entries) or free <= 0:
            return None
        # Some were gone (another dispatcher won them, or they were cancelled
        # or moved): let the database pick the next ones, skipping rows other
        # dispatchers hold.
        self.contended_until = now + self.CONTENTION_BACKOFF
        return free

    def _claim_limited(self, group, queues, free, now, paused):
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
            self.timeline.drop_due(group, skip=paused | self.gate.blocked(now))

    def _from_store(self, queues, limit, now, ids=None):
        outcomes = self.outcomes.pending
        jobs = self.store.claim(queues, limit, now, ids=ids, finished=outcomes, in_flight=self.pool.in_flight())
        if outcomes:
            self.outcomes.written(self.store, self.clock.time())
        return jobs

    def release_held(self):
        """Give the window back the entries held while their jobs still ran here."""
        if not self.held:
            return
        running = self.pool.in_flight()
        for job_id in [i for i in self.held if i not in running]:
            self.timeline.upsert(self.held.pop(job_id))

    def _start(self, group, jobs, now):
        if jobs:
            self.leases.claimed(now)
            remove = self.timeline.remove
            for job in jobs:
                remove(job.id)
            if self.rollups is not None:
                self.rollups.started_many(jobs, now)
        self.pool.submit_many(group, jobs)
        self.claimed_total += len(jobs)
        return jobs

    def _materialize(self, now):
        """Turn due schedules into jobs (the store's compare-and-set decides who does)."""
        for entry in self.store.materialize(now, self.timeline.take_schedules()):
            self.window.apply(entry)
