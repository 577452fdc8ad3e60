"""The test helpers themselves (``scheduler_app.testing`` gives them; see its docstring)."""

import dataclasses
import json
import os
import threading

from django.utils import timezone

from .. import conf, registry
from ..lifecycle import claim
from ..lifecycle.finishing import finish_outcomes
from ..models import Job
from ..runtime.executor import Executor
from ..runtime.wiring import retry_policy
from ..vocabulary.claims import ClaimRequest
from ..vocabulary.jobs import Status

# A guard against a task that enqueues itself for ever.
MAX_RUNS = 10_000


def drain(queue=None, *, with_scheduled=False, with_retries=True, using="default"):
    """Run every due job now, synchronously, until none is left; return what happened.

    Jobs run in the order a dispatcher would run them: due jobs by priority,
    then time. ``with_scheduled``: jobs due later run too, in the order their
    times come (a dispatcher's order, with the clock jumped forward).
    ``with_retries``: a failed attempt with attempts left runs again at once
    (its backoff skipped); otherwise it stays pending at its retry time.
    Every job a dispatcher would run runs: of limited and paused queues,
    and with a ``concurrency_key``; the limits (a queue's, a key's) do not
    apply (one job runs at a time). A task's
    ``timeout`` is not enforced (the job runs in this thread). ``queue``
    limits the drain to one queue. A job waiting on dependencies runs once
    they succeeded (in the same drain, when they run in it); a job that
    snoozed runs again only ``with_scheduled`` (its new time is later).

    Workflows run too: the jobs they make pending, and their callbacks
    (enqueued by the finish that ends a workflow's last job).

    Return ``{"succeeded": n, "failed": n, "cancelled": n, "snoozed": n}``:
    jobs that reached each end (a job retried twice and then successful
    counts once, as succeeded; a dependent that a failure cancelled counts
    as cancelled), and how many times a job snoozed.
    """
    queues = [queue] if queue is not None else sorted(conf.known_queues())
    summary = {"succeeded": 0, "failed": 0, "cancelled": 0, "snoozed": 0}
    executor = Executor(retry_policy(), using, own_connections=False)
    worker = f"drain-{os.getpid()}-{threading.get_ident()}"
    for _ in range(MAX_RUNS):
        now = timezone.now()
        # The dispatcher's claim, without the limits (one job runs at a time here).
        request = ClaimRequest(worker, tuple(queues), 1, 3600.0, now, limits=False)
        jobs = claim(request, using=using).jobs
        if not jobs and with_scheduled:
            due_by = _next_time(queues, using)
            if due_by is not None:
                jobs = claim(dataclasses.replace(request, due_by=due_by), using=using).jobs
        if not jobs:
            return summary
        job = jobs[0]
        outcome = executor(job, threading.Event(), None)
        if outcome.status == Status.PENDING and with_retries and outcome.error is not None:
            outcome = dataclasses.replace(outcome, retry_at=now)
        # What the job was left in: a requested cancel turns a retry into a
        # cancel (the one rule of how an attempt ends).
        cascaded = {}
        status = finish_outcomes([outcome], now=now, using=using, cascaded=cascaded).get(job.id, outcome.status)
        if outcome.snoozed and status == Status.PENDING:
            summary["snoozed"] += 1
        elif status in summary:
            summary[status] += 1
        for ended in cascaded.values():  # dependents its failure cancelled
            summary[ended] += 1
    raise RuntimeError(f"drain() ran {MAX_RUNS} jobs and more keep coming: does a task enqueue itself?")


def _next_time(queues, using):
    return (
        Job.objects.using(using)
        .pending()
        .filter(queue__in=queues)
        .order_by("execute_at")
        .values_list("execute_at", flat=True)
        .first()
    )


def enqueued(task=None, *, args=None, kwargs=None, queue=None, using="default"):
    """Return the pending jobs that match (``task``: a Task or its name), oldest first."""
    jobs = Job.objects.using(using).pending().order_by("id")
    if task is not None:
        jobs = jobs.filter(task=registry.name_of(task) if hasattr(task, "module_path") else task)
    if queue is not None:
        jobs = jobs.filter(queue=queue)
    found = list(jobs)
    if args is not None:
        found = [j for j in found if j.args == json.loads(json.dumps(list(args)))]
    if kwargs is not None:
        found = [j for j in found if j.kwargs == json.loads(json.dumps(dict(kwargs)))]
    return found


def assert_enqueued(task=None, *, args=None, kwargs=None, queue=None, count=None, using="default"):
    """Fail unless a pending job matches (exactly ``count`` of them, if given); return the matches."""
    found = enqueued(task, args=args, kwargs=kwargs, queue=queue, using=using)
    if (count is None and not found) or (count is not None and len(found) != count):
        wanted = _describe(task, args, kwargs, queue)
        expected = f"{count} pending jobs" if count is not None else "a pending job"
        raise AssertionError(f"Expected {expected} matching {wanted}, found {len(found)}.\n{_listing(using)}")
    return found


def refute_enqueued(task=None, *, args=None, kwargs=None, queue=None, using="default"):
    """Fail if a pending job matches."""
    found = enqueued(task, args=args, kwargs=kwargs, queue=queue, using=using)
    if found:
        raise AssertionError(
            f"Expected no pending job matching {_describe(task, args, kwargs, queue)}, "
            f"found {len(found)}.\n{_listing(using)}"
        )


def _describe(task, args, kwargs, queue):
    parts = []
    if task is not None:
        parts.append(registry.name_of(task) if hasattr(task, "module_path") else str(task))
    if args is not None:
        parts.append(f"args={list(args)!r}")
    if kwargs is not None:
        parts.append(f"kwargs={dict(kwargs)!r}")
    if queue is not None:
        parts.append(f"queue={queue!r}")
    return " ".join(parts) or "anything"


def _listing(using, limit=20):
    jobs = list(Job.objects.using(using).pending().order_by("id")[: limit + 1])
    if not jobs:
        return "Nothing is enqueued."
    lines = [
        f"  #{j.pk} {j.task} args={conf.filtered(j.args)!r} kwargs={conf.filtered(j.kwargs)!r} queue={j.queue!r} "
        f"at {j.execute_at.isoformat()}"
        for j in jobs[:limit]
    ]
    more = "\n  ..." if len(jobs) > limit else ""
    return "Enqueued (pending):\n" + "\n".join(lines) + more


__all__ = ["assert_enqueued", "drain", "enqueued", "refute_enqueued"]
