"""The dispatcher's stop: a burst that is done, the grace period and its hand-back, a stop without the database.

A mixin of ``loop.Dispatcher`` (its attributes are the loop's; loop thread only).
"""

import logging

logger = logging.getLogger("scheduler_app.dispatcher.loop")


class StopSteps:
    def _check_done(self):
        """A burst or a --max-jobs run ends when its work is done: nothing running, nothing left to claim."""
        if self.pool.busy() or self.outcomes.pending or self.pool.abandoned_count:
            return
        if self.claims.done():
            self.finished = True
        elif self.burst:
            # Due jobs of paused queues cannot run: they do not keep a burst alive.
            self.timeline.promote(self.clock.time())
            if not self.timeline.has_due(skip=self.paused) and not self.store.any_due(
                self.queues - self.paused, self.clock.time()
            ):
                self.finished = True

    def _begin_stop(self, now):
        self._stop_deadline = now + self.grace
        logger.info(
            "stopping: %d running jobs get %.1fs to finish", self.pool.busy(), self.grace, extra={"action": "stop"}
        )

    def _stop_step(self, now):
        if self._stop_deadline is None:
            self._begin_stop(now)
        if not self.pool.busy() and not self.outcomes.pending and not self.overdue:
            self.finished = True
        elif now >= self._stop_deadline:
            self.pool.close()  # an attempt no thread has taken yet must not start once released
            self._collect(now)  # one that ended meanwhile is written, not released (and run again)
            unfinished = self.pool.running_jobs() + [job for job, _ in self.overdue.values()]
            self.overdue.clear()
            for stop_attempts in self.before_release:
                stop_attempts(unfinished)  # gone before the release commits: another dispatcher may start them
            self._flush(now)
            released = self.store.release(unfinished, now)
            logger.warning(
                "grace period over: handed back %d unfinished jobs; they run again once this process is gone",
                len(released),
                extra={"action": "release"},
            )
            self.finished = True

    def _give_up(self, now, exc):
        """Past the grace period, a stop no longer waits for the database: return True when it ended the loop.

        What could not be written or released stays running in the database;
        its leases expire and another dispatcher takes the jobs back
        (invariant 10: a SIGTERM ends the dispatcher within the grace period
        plus a few seconds, whatever the database does).
        """
        if not self._stopping or self._stop_deadline is None or now < self._stop_deadline:
            return False
        self.pool.close()
        unfinished = self.pool.running_jobs() + [job for job, _ in self.overdue.values()]
        for stop_attempts in self.before_release:
            stop_attempts(unfinished)  # nothing of this dispatcher's may run on once it is gone
        logger.error(
            "stopping without the database (%s): %d running jobs were not released and %d outcomes not "
            "written; their leases expire and another dispatcher takes the jobs back",
            exc,
            len(unfinished),
            len(self.outcomes.pending),
            extra={"action": "stop_unreleased"},
        )
        self.finished = True
        return True
