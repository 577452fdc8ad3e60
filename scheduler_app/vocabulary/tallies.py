"""The words of the per-minute history: histogram buckets, how an attempt's ending is named, a tally.

For each (minute, queue, task) a dispatcher counts attempts started, their
outcomes (succeeded, failed, retried, cancelled) and two histograms, wait
(due time to start) and run (start to finish), in fixed buckets so that
several dispatchers' figures merge by adding them (``dispatcher.rollups``
gathers them; the rollup table, the history and the metrics read them with
these buckets).

Pure: standard library only.
"""

import bisect
import math
from dataclasses import dataclass, field

from .jobs import Status

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
