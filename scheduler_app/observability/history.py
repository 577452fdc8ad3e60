"""Read the history: the rollups as buckets of 1, 10 or 60 minutes, and per-task figures.

Percentiles come from the merged histograms (``vocabulary.tallies.percentile``),
so they are as good as the buckets allow: linear within a bucket, never
above the largest value seen. Each read is two or three aggregate queries
over the rollup table (served by its index on ``minute``), whatever the
number of jobs.
"""

import math
from datetime import UTC, datetime, timedelta

from django.db.models import Max, Q, Sum, Value
from django.db.models.functions import Floor
from django.utils import timezone

from ..models import Rollup
from ..sql import Epoch
from ..sql.rollups import COUNTS
from ..vocabulary.tallies import SLOTS, percentile

OUTCOMES = ("succeeded", "failed", "retried", "cancelled")


def bucket_seconds(minutes):
    """Return the bucket width for a range of ``minutes``: 1 min up to an hour, 10 min up to a day, else 1 h."""
    if minutes <= 60:
        return 60
    if minutes <= 24 * 60:
        return 600
    return 3600


def _bounds(minutes, step, now):
    end_epoch = math.floor(now.timestamp() / 60) * 60 + 60  # the current minute included
    end_epoch = math.ceil(end_epoch / step) * step
    count = math.ceil(minutes * 60 / step)
    return end_epoch - count * step, end_epoch, count


def _filtered(start, end, queue, task):
    rows = Rollup.objects.filter(
        minute__gte=datetime.fromtimestamp(start, UTC), minute__lt=datetime.fromtimestamp(end, UTC)
    )
    if queue:
        rows = rows.filter(queue=queue)
    if task:
        rows = rows.filter(task=task)
    return rows


def _sums():
    # Named apart from the columns: a filter on a column must not read an aggregate.
    sums = {f"x_{name}": Sum(name) for name in ("enqueued", *COUNTS)}
    for h in ("wait", "run"):
        sums.update({f"x_{h}_{i}": Sum(f"{h}_{i}") for i in range(SLOTS)})
        sums[f"x_{h}_max"] = Max(f"{h}_max")
    return sums


def _timing(row, h):
    counts = [row.get(f"x_{h}_{i}") or 0 for i in range(SLOTS)]
    top = row.get(f"x_{h}_max") or 0.0
    p50, p95 = percentile(counts, 0.5, top), percentile(counts, 0.95, top)
    return {
        "count": sum(counts),
        "p50": round(p50, 6) if p50 is not None else None,
        "p95": round(p95, 6) if p95 is not None else None,
        "max": round(top, 6) if sum(counts) else None,
    }


def _figures(row):
    figures = {name: row.get(f"x_{name}") or 0 for name in ("enqueued", *COUNTS)}
    figures["wait"] = _timing(row, "wait")
    figures["run"] = _timing(row, "run")
    return figures


def series(minutes=60, *, queue=None, task=None, now=None):
    """Return the history of the last ``minutes`` (oldest bucket first), for one queue and/or task if given."""
    now = now or timezone.now()
    step = bucket_seconds(minutes)
    start, end, count = _bounds(minutes, step, now)
    rows = _filtered(start, end, queue, task)
    bucket = Floor(Epoch("minute") / Value(float(step)))
    by_bucket = {
        int(r["bucket"]): r for r in rows.annotate(bucket=bucket).order_by().values("bucket").annotate(**_sums())
    }
    samples = {}
    sampled = rows.filter(task="") if not task else _filtered(start, end, queue, None).filter(task="")
    per_queue = (
        sampled.annotate(bucket=bucket)
        .order_by()
        .values("bucket", "queue")
        .annotate(depth=Max("depth"), due=Max("due"), lag=Max("lag"))
    )
    for r in per_queue:
        b = samples.setdefault(int(r["bucket"]), {"depth": 0, "due": 0, "lag": 0.0})
        b["depth"] += r["depth"]
        b["due"] += r["due"]
        b["lag"] = max(b["lag"], r["lag"])
    buckets = []
    for i in range(count):
        key = start // step + i
        bucket_start = datetime.fromtimestamp(start + i * step, UTC)
        entry = {"start": bucket_start, **_figures(by_bucket.get(key, {}))}
        entry.update(samples.get(key, {"depth": 0, "due": 0, "lag": 0.0}))
        buckets.append(entry)
    totals = _figures(rows.order_by().aggregate(**_sums()))
    return {
        "minutes": minutes,
        "bucket_seconds": step,
        "queue": queue or None,
        "task": task or None,
        "start": datetime.fromtimestamp(start, UTC),
        "end": datetime.fromtimestamp(end, UTC),
        "buckets": buckets,
        "totals": totals,
    }


def per_task(minutes=60, *, queue=None, now=None):
    """Return one row per task that ran in the last ``minutes``: runs, failures, failure rate, p50/p95 run time, last failure."""
    now = now or timezone.now()
    start = now - timedelta(minutes=minutes)
    rows = Rollup.objects.filter(minute__gte=minute_of(start)).exclude(task="")
    if queue:
        rows = rows.filter(queue=queue)
    sums = _sums()
    sums["last_failure"] = Max("minute", filter=Q(failed__gt=0) | Q(retried__gt=0))
    found = []
    for r in rows.order_by().values("task").annotate(**sums).order_by("task"):
        runs = sum(r[f"x_{o}"] or 0 for o in OUTCOMES)
        failures = (r["x_failed"] or 0) + (r["x_retried"] or 0)
        timing = _timing(r, "run")
        found.append(
            {
                "task": r["task"],
                "runs": runs,
                "succeeded": r["x_succeeded"] or 0,
                "failures": failures,
                "failure_rate": round(failures / runs, 4) if runs else 0.0,
                "p50": timing["p50"],
                "p95": timing["p95"],
                "last_failure": r["last_failure"],
            }
        )
    found.sort(key=lambda t: (-t["runs"], t["task"]))
    return found


def minute_of(moment):
    return moment.replace(second=0, microsecond=0)


__all__ = ["bucket_seconds", "per_task", "series"]
