"""Per-minute rollups of what a dispatcher did, aggregated in memory on the loop thread.

For each (minute, queue, task): attempts started, their outcomes
(succeeded, failed, retried, cancelled) and two histograms, wait (due time
to start) and run (start to finish), in fixed buckets so that several
dispatchers' figures merge by adding them. The loop hands what it gathered
to its store once a minute (``Store.write_rollups``), which adds it to the
history table and to the counters the metrics read.

Pure: no Django. Loop thread only.
"""

import bisect
import logging
import math
from dataclasses import dataclass, field

from .types import Status

# Upper bounds (seconds) of the histogram buckets; one more bucket holds
# everything above the last. The metrics' and the history's buckets.
BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)
SLOTS = len(BUCKETS) + 1
# How an attempt ended, as the rollups and the metrics name it.
OUTCOMES = ("succeeded", "failed", "retried", "cancelled")
_OUTCOME_OF = {
    Status.SUCCEEDED: "succeeded",
    Status.FAILED: "failed",
    Status.PENDING: "retried",  # failed, and will run again
    Status.CANCELLED: "cancelled",
}


def bucket_of(seconds):
    """Return the index of the bucket ``seconds`` falls in (upper bounds inclusive)."""
    return bisect.bisect_left(BUCKETS, seconds)


def percentile(counts, q, maximum=None):
    """Return the ``q`` quantile (0..1) of a histogram of ``counts`` per bucket, or None when empty.

    Linear within the bucket that holds it, as Prometheus' histogram_quantile
    does; the last bucket's upper end is ``maximum`` (the largest value seen),
    and no estimate exceeds it.
    """
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            low = BUCKETS[i - 1] if i > 0 else 0.0
            high = BUCKETS[i] if i < len(BUCKETS) else max(maximum or low, low)
            value = low + (high - low) * max(rank - seen, 0) / n
            return min(value, maximum) if maximum is not None else value
        seen += n
    return maximum


@dataclass(slots=True)
class Histogram:
    counts: list = field(default_factory=lambda: [0] * SLOTS)
    total: float = 0.0
    max: float = 0.0

    def add(self, seconds):
        seconds = max(seconds, 0.0)
        self.counts[bucket_of(seconds)] += 1
        self.total += seconds
        self.max = max(self.max, seconds)

    def merge(self, other):
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.total += other.total
        self.max = max(self.max, other.max)


@dataclass(slots=True)
class Tally:
    """What one dispatcher saw of one (minute, queue, task)."""

    started: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    cancelled: int = 0
    wait: Histogram = field(default_factory=Histogram)
    run: Histogram = field(default_factory=Histogram)

    def merge(self, other):
        for name in ("started", *OUTCOMES):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.wait.merge(other.wait)
        self.run.merge(other.run)


def minute_of(epoch):
    """Return the start of the minute ``epoch`` falls in (epoch seconds)."""
    return float(math.floor(epoch / 60) * 60)


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
        tally = self._tally(now, job)
        tally.started += 1
        if math.isfinite(job.execute_at):
            tally.wait.add(now - job.execute_at)

    def finished(self, job, outcome, now):
        """Count how an attempt ended, and how long it ran since its claim."""
        tally = self._tally(now, job)
        name = _OUTCOME_OF.get(outcome.status)
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


class Reporter:
    """The loop's rollups: gathered per claim and outcome, written every ``interval`` seconds.

    Loop thread only. The first write comes one interval after the first
    ``due()``; a write that fails keeps its tallies for the next one. Each
    write that covers any work logs one INFO line (per-job lines are DEBUG).
    """

    def __init__(self, interval, log):
        self.interval = interval
        self.log = log
        self.rollups = Rollups()
        self.started = self.rollups.started
        self.finished = self.rollups.finished
        self.next_write = None  # set by the first due()
        self._last_write = None  # when the last write happened (the summary line's span)

    def due(self, now):
        """Return True when a write is due (the first call only starts the clock)."""
        if self.next_write is None:
            self.next_write = now + self.interval
            return False
        return now >= self.next_write

    def write(self, store, now, *, busy, slots):
        """Hand the tallies gathered since the last write to ``store``; log the summary line."""
        tallies = self.rollups.take()
        try:
            store.write_rollups(tallies, now)
        except BaseException:
            self.rollups.put_back(tallies)
            raise
        finally:
            self.next_write = now + self.interval
        since, self._last_write = self._last_write, now
        if self.log.isEnabledFor(logging.INFO):
            line = summary(tallies, now - since if since is not None else self.interval)
            if line is not None:
                self.log.info(
                    "dispatcher %s %s; %d/%d slots busy", store.worker_id, line, busy, slots,
                    extra={"action": "summary"},
                )
