"""GET /metrics: the scheduler in Prometheus' text format, read from the database at scrape time.

One scrape of any web process sees every dispatcher: nothing is kept in
memory here. The collector runs six queries whatever the table size:

1. jobs by queue and status now (``stats.job_counts``, the dashboard's
   count: past ``stats.EXACT_COUNT_LIMIT`` rows on PostgreSQL the finished
   statuses are the planner's estimate, under the queue ``*``);
2. pending jobs by queue, with the oldest due one (the pending rows only);
3. running jobs by dispatcher and queue (the slots in use);
4. the counters table (finished attempts and the wait/run histograms, per
   queue and task: added by the dispatchers with their rollups, never pruned);
5. live dispatchers (their slots);
6. dispatchers by state.

Gauges say what is now; what accumulates is a counter (``_total``).

Who may scrape: staff with ``scheduler_app.view_job`` (a session, or
``Authorization: Token``), or ``Authorization: Bearer <SCHEDULER["METRICS_TOKEN"]>``.
"""

import hmac
from collections import defaultdict

from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .. import conf
from ..models import Counter, Job, JobStatus, Worker, WorkerState, stale_before
from ..sql.readable import worker_slots
from ..sql.reads import pending_by_queue
from ..sql.timeouts import bounded_statements, is_timeout
from ..vocabulary.tallies import BUCKETS, OUTCOMES, SLOTS
from . import stats

VIEW_PERMISSION = "scheduler_app.view_job"


def _buckets(counts):
    """Return Prometheus' cumulative buckets for counts per bucket (the last: above 300 s)."""
    running = 0
    buckets = []
    for bound, n in zip(BUCKETS, counts, strict=False):
        running += n
        buckets.append((repr(float(bound)), running))
    buckets.append(("+Inf", running + counts[-1]))
    return buckets


class SchedulerCollector(Collector):
    """Every metric of the scheduler, from the database."""

    def __init__(self, now=None):
        self.now = now

    def collect(self):
        now = self.now or timezone.now()
        queues = set(conf.known_queues())
        jobs = GaugeMetricFamily(
            "scheduler_jobs", "Jobs by queue and status now (as the dashboard counts them).", labels=["queue", "status"]
        )
        current = stats.job_counts(by_queue=True)
        queues.update(queue for queue, _ in current if queue != stats.ALL_QUEUES)
        lag = GaugeMetricFamily(
            "scheduler_queue_lag_seconds", "Age of the oldest due pending job of the queue.", labels=["queue"]
        )
        oldest = {}
        for queue, (_, _, first_due) in pending_by_queue(now).items():
            queues.add(queue)
            if first_due is not None:
                oldest[queue] = first_due
        running = defaultdict(int)  # (dispatcher, queue) -> running jobs: the slots in use
        for row in Job.objects.running().order_by().values("worker", "queue").annotate(n=Count("id")):
            queues.add(row["queue"])
            running[(row["worker"], row["queue"])] += row["n"]

        finished = CounterMetricFamily(
            "scheduler_jobs_finished", "Attempts that ended, by outcome.", labels=["queue", "task", "outcome"]
        )
        wait = HistogramMetricFamily(
            "scheduler_job_wait_seconds", "Seconds from a job's due time to its attempt's start.", labels=["queue"]
        )
        duration = HistogramMetricFamily(
            "scheduler_job_duration_seconds", "Seconds from an attempt's start to its end.", labels=["queue", "task"]
        )
        waits = {}
        for row in Counter.objects.order_by("queue", "task").values():
            queue, task = row["queue"], row["task"]
            queues.add(queue)
            for outcome in OUTCOMES:
                finished.add_metric([queue, task, outcome], row[outcome])
            duration.add_metric([queue, task], _buckets([row[f"run_{i}"] for i in range(SLOTS)]), row["run_sum"])
            counts, total = waits.get(queue, ([0] * SLOTS, 0.0))
            waits[queue] = ([a + row[f"wait_{i}"] for i, a in enumerate(counts)], total + row["wait_sum"])
        for queue in sorted(queues):
            for status in JobStatus.values:
                jobs.add_metric([queue, status], current.get((queue, status), 0))
            lag.add_metric([queue], max((now - oldest[queue]).total_seconds(), 0.0) if queue in oldest else 0.0)
        for (queue, status), n in current.items():
            if queue == stats.ALL_QUEUES:  # an estimate of a big table's finished jobs
                jobs.add_metric([queue, status], n)
        for queue, (counts, total) in sorted(waits.items()):
            wait.add_metric([queue], _buckets(counts), total)
        yield jobs
        yield lag
        yield finished
        yield wait
        yield duration
        yield from self._workers(now, queues, running)

    def _workers(self, now, queues, running):
        workers = GaugeMetricFamily("scheduler_workers", "Dispatcher processes by state.", labels=["state"])
        slots = GaugeMetricFamily(
            "scheduler_worker_slots",
            "Worker slots of live dispatchers by queue (a shared pool's free slots count for each of its queues).",
            labels=["queue", "state"],
        )
        states = dict.fromkeys(WorkerState.values, 0)
        for row in Worker.objects.exclude(state=WorkerState.ALIVE).order_by().values("state").annotate(n=Count("id")):
            states[row["state"]] = states.get(row["state"], 0) + row["n"]
        fresh = stale_before(now)
        live = []
        for worker in Worker.objects.filter(state=WorkerState.ALIVE).only("id", "queues", "slots", "last_heartbeat"):
            if (
                worker.last_heartbeat is not None and worker.last_heartbeat >= fresh
            ):  # None: SQLite text that is no time
                live.append(worker)
                states[WorkerState.ALIVE] += 1
            else:
                states[WorkerState.DEAD] += 1
        for state, n in states.items():
            workers.add_metric([state], n)
        busy, free = defaultdict(int), defaultdict(int)
        for worker in live:
            shared = "*" in worker_slots(worker.slots)
            mine = stats.worker_slots(worker)
            in_use = sum(running[(worker.id, q)] for q in mine)
            for queue, n in mine.items():
                busy[queue] += running[(worker.id, queue)]
                free[queue] += max((n - in_use) if shared else (n - running[(worker.id, queue)]), 0)
        for queue in sorted(queues | set(busy)):
            slots.add_metric([queue, "busy"], busy[queue])
            slots.add_metric([queue, "free"], free[queue])
        yield workers
        yield slots


def render(now=None):
    """Return the metrics in Prometheus' text format (bytes)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SchedulerCollector(now))
    return generate_latest(registry)


def _bearer(request):
    header = request.headers.get("Authorization", "")
    kind, _, value = header.partition(" ")
    return value.strip() if kind.lower() == "bearer" else None


def _api_token_user(request):
    """Return the user of an ``Authorization: Token`` header (DRF's tokens), or None."""
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("token "):
        return None
    try:
        found = TokenAuthentication().authenticate_credentials(header.split(" ", 1)[1].strip())
    except (AuthenticationFailed, ValueError):
        return None
    return found[0]


def refusal(request):
    """Return the response that refuses this scrape, or None when it may go ahead."""
    token = conf.get("METRICS_TOKEN")
    bearer = _bearer(request)
    if bearer is not None:
        if token and hmac.compare_digest(bearer.encode(), token.encode()):
            return None
        return _denied(401, "Bad bearer token.")
    user = _api_token_user(request) or getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _denied(401, "Authentication credentials were not provided.")
    if not (user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION)):
        return _denied(403, "You do not have permission to perform this action.")
    return None


def _denied(status, text):
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="scheduler metrics"'
    return response


@require_safe
def metrics_view(request):
    """Serve GET /metrics, and HEAD: the same answer without a body (and without the five queries)."""
    refused = refusal(request)
    if refused is not None:
        return refused
    if request.method == "HEAD":
        return HttpResponse(b"", content_type=CONTENT_TYPE_LATEST)
    try:
        with bounded_statements(conf.get("REQUEST_STATEMENT_TIMEOUT")):
            body = render()
    except DatabaseError as exc:
        if not is_timeout(exc):
            raise
        return HttpResponse(
            b"# the database took longer than REQUEST_STATEMENT_TIMEOUT\n", status=503, content_type="text/plain"
        )
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
