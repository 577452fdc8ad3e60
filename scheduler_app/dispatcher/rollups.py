"""Per-minute rollups of what a dispatcher did, aggregated in memory on the loop thread.

The loop counts every claim and every outcome here (``Rollups``) and hands
what it gathered to its store (``Reporter``; ``Store.write_rollups`` adds it
to the per-minute history table and to the counters the metrics read): every
``FRESH_EVERY`` seconds, so that ``/metrics`` counts an attempt at most that
long after it ended, and with the queues' samples once per interval (a
minute), so that the history is what it always was. The buckets and the names are ``vocabulary.tallies``.

Pure: no Django. Loop thread only.
"""

import copy
import logging
import math

from ..vocabulary.tallies import _OUTCOME_OF, OUTCOMES, Tally, percentile


class Rollups:
    """Tallies per (minute, queue, task) since the last ``take()``."""

    def __init__(self):
        self._tallies = {}  # (minute epoch, queue, task) -> Tally; loop thread only

    def __len__(self):
        return len(self._tallies)

    def _tally(self, now, job):
        # Per job on the loop thread: the dict lookup is all it costs.
        key = (now - now % 60, job.queue, job.task)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = Tally()
        return tally

    def started(self, job, now):
        """Count a claimed attempt, and how long it waited since it was due."""
        self.started_many((job,), now)

    def finished(self, job, outcome, now):
        """Count how an attempt ended, and how long it ran since its claim."""
        self.finished_many(((job, outcome),), now)

    def started_many(self, jobs, now):
        """Count claimed attempts (a claim's batch) and how long each waited since it was due.

        The tally is looked up once per run of jobs of the same queue and task.
        """
        last, tally = None, None
        for job in jobs:
            if (job.queue, job.task) != last:
                last = (job.queue, job.task)
                tally = self._tally(now, job)
            tally.started += 1
            if math.isfinite(job.execute_at):
                tally.wait.add(now - job.execute_at)

    def finished_many(self, ended, now):
        """Count how each ``(job, outcome)`` of ``ended`` ended, and how long it ran since its claim."""
        last, tally, outcome_of = None, None, _OUTCOME_OF
        for job, outcome in ended:
            if (job.queue, job.task) != last:
                last = (job.queue, job.task)
                tally = self._tally(now, job)
            name = outcome_of.get(outcome.status)
            if name is not None:
                setattr(tally, name, getattr(tally, name) + 1)
            tally.run.add(now - job.last_attempted_at.timestamp())

    def take(self):
        """Return everything gathered so far, ``{(minute, queue, task): Tally}``, and start afresh."""
        taken, self._tallies = self._tallies, {}
        return taken

    def put_back(self, tallies):
        """Merge tallies that could not be written back in, to be written next time."""
        for key, tally in tallies.items():
            mine = self._tallies.get(key)
            if mine is None:
                self._tallies[key] = tally
            else:
                mine.merge(tally)


def summary(tallies, seconds):
    """Return the one INFO line a dispatcher logs per rollup write, or None when nothing happened.

    ``tallies`` as ``Rollups.take()`` returns them; ``seconds`` the span
    they cover. Counts are summed over queues and tasks; the percentiles
    come from the merged histograms, like the history's.
    """
    total = Tally()
    for tally in tallies.values():
        total.merge(tally)
    ended = sum(getattr(total, name) for name in OUTCOMES)
    if not total.started and not ended:
        return None

    def ms(histogram, q):
        value = percentile(histogram.counts, q, histogram.max)
        return "-" if value is None else f"{value * 1000:.0f}ms"

    return (
        f"last {seconds:.0f}s: {total.started:,} started, {ended:,} ended ("
        + ", ".join(f"{getattr(total, name):,} {name}" for name in OUTCOMES)
        + f"); wait p50 {ms(total.wait, 0.5)} p95 {ms(total.wait, 0.95)}"
        + f"; run p50 {ms(total.run, 0.5)} p95 {ms(total.run, 0.95)}"
    )


# Seconds between writes of the tallies alone: /metrics counts an attempt that
# ended this long ago or more recently: within 15 s (docs/OPERATIONS.md) with a tick's latency on top.
FRESH_EVERY = 10.0


class Reporter:
    """The loop's rollups: gathered per claim and outcome, written every ``FRESH_EVERY`` seconds while
    there are any, and with the queues' samples every ``interval`` seconds.

    Loop thread only. The first full write comes one interval after the
    first ``due()``; a write that fails keeps its tallies for the next one.
    Each full write that covers any work logs one INFO line (per-job lines
    are DEBUG).
    """

    def __init__(self, interval, log, fresh_every=FRESH_EVERY):
        self.interval = interval
        self.fresh_every = min(fresh_every, interval)
        self.log = log
        self.rollups = Rollups()
        self.next_full = None  # set by the first due()
        self._next_fresh = None  # set by the first tally after a write
        self._last_write = None  # when the last full write happened (the summary line's span)
        self._summary = Rollups()  # what the partial writes since the last full one wrote, for its line

    @property
    def next_write(self):
        """When the next write is due (None before the first ``due()``)."""
        if self.next_full is None or self._next_fresh is None:
            return self.next_full
        return min(self.next_full, self._next_fresh)

    def started(self, job, now):
        self.started_many((job,), now)

    def finished(self, job, outcome, now):
        self.finished_many(((job, outcome),), now)

    def started_many(self, jobs, now):
        self.rollups.started_many(jobs, now)
        if self._next_fresh is None:
            self._next_fresh = now + self.fresh_every

    def finished_many(self, ended, now):
        self.rollups.finished_many(ended, now)
        if self._next_fresh is None:
            self._next_fresh = now + self.fresh_every

    def due(self, now):
        """Return True when a write is due (the first call only starts the clock)."""
        if self.next_full is None:
            self.next_full = now + self.interval
            return False
        return now >= self.next_write

    def write(self, store, now, *, busy, slots, final=False):
        """Hand the tallies gathered since the last write to ``store`` (with the samples when a full
        write is due, or ``final``: the dispatcher stops); log the summary line at a full write."""
        full = final or self.next_full is None or now >= self.next_full
        tallies = self.rollups.take()
        try:
            if full:
                store.write_rollups(tallies, now)
            else:
                store.write_rollups(tallies, now, samples=False)
        except BaseException:
            self.rollups.put_back(tallies)
            self._next_fresh = now + self.fresh_every
            raise
        finally:
            if full:
                self.next_full = now + self.interval
        self._next_fresh = None
        # A copy: the store may keep the objects it was handed (the tests' fake does).
        self._summary.put_back(copy.deepcopy(tallies))
        if not full:
            return
        tallies = self._summary.take()
        since, self._last_write = self._last_write, now
        if self.log.isEnabledFor(logging.INFO):
            line = summary(tallies, now - since if since is not None else self.interval)
            if line is not None:
                self.log.info(
                    "dispatcher %s %s; %d/%d slots busy",
                    store.worker_id,
                    line,
                    busy,
                    slots,
                    extra={"action": "summary"},
                )
