"""The limited claim's turn at its queues (issue 28): one statement while nothing contends, exact when claims race.

PostgreSQL only (SQLite's writers take turns anyway): the claim takes its
limited queues' turns without waiting and counts on its own snapshot; a
claim of the same queue that holds the turn, or committed after that
snapshot, sends it to the claim that waits for the turn. The rate limit's
ledger on the queue row spares the count of the window while it cannot bind.
Real threads, each a dispatcher's store with its own connections, race on
small limits and must never exceed them.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, Queue
from scheduler_app.runtime.store import DjangoStore
from scheduler_app.vocabulary.jobs import Outcome, Status
from tests import plumbing
from tests.plumbing import claim_keyed, most_at_once, most_in_a_window

pytestmark = [pytest.mark.django_db(transaction=True)]

ADD = "tests.testapp.tasks.add"
QUEUES = ("slow", "default")


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the turn is PostgreSQL's; SQLite's writers take turns")


def add_jobs(n, queue="slow"):
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i], "queue": queue} for i in range(n)])


def claim_limited(limit=4, now=None, worker="w"):
    return plumbing.claim_limited(worker, queues=list(QUEUES), limit=limit, lease=30, now=now)


def ledger():
    return Queue.objects.values("rate_starts", "rate_checked_starts", "rate_checked_window", "rate_checked_at").get(
        name="slow"
    )


def waiting_for_a_lock():
    """Return whether a session of this test database waits for a lock another holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # a transaction keeps its first view of the activity
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid())"
        )
        return cursor.fetchone()[0]


def test_a_claim_that_holds_the_turn_is_waited_for_and_counted():
    """Another transaction holds the queue's turn and fills its limit: the claim finds the queue
    contended, waits for the turn, and counts what that transaction started."""
    lifecycle.set_limits("slow", concurrency_limit=2)
    add_jobs(6)
    taken = threading.Event()

    def other():
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("UPDATE scheduler_app_queue SET paused = paused WHERE name = 'slow'")
            first = list(Job.objects.filter(queue="slow").order_by("id").values_list("id", flat=True)[:2])
            Job.objects.filter(id__in=first).update(status="running", worker="other", attempts=1)
            taken.set()
            # Hold the turn until the claim waits for it (a hang guard of 10 s).
            end = time.monotonic() + 10
            while time.monotonic() < end and not waiting_for_a_lock():
                time.sleep(0.005)
        connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    assert taken.wait(30)
    jobs, full = claim_limited()
    thread.join()
    assert jobs == [] and full == {"slow": None}
    assert Job.objects.filter(queue="slow", status="running").count() == 2


def test_the_rate_window_is_counted_only_when_the_ledger_says_it_may_bind():
    lifecycle.set_limits("slow", rate_limit=10, rate_period=60)
    add_jobs(20)
    t = timezone.now() + timedelta(seconds=1)
    assert len(claim_limited(2, t)[0]) == 2  # no check yet: counted
    first = ledger()
    assert first["rate_checked_at"] == t and first["rate_starts"] == 2 and first["rate_checked_window"] == 0
    assert len(claim_limited(2, t + timedelta(seconds=1))[0]) == 2  # 0 + 2 + 2 < 10: not counted
    assert len(claim_limited(4, t + timedelta(seconds=2))[0]) == 4  # 0 + 4 + 4 < 10: not counted
    assert ledger()["rate_checked_at"] == t and ledger()["rate_starts"] == 8
    jobs, full = claim_limited(4, t + timedelta(seconds=3))  # 0 + 8 + 4: it may bind, counted: 8
    assert len(jobs) == 2 and full == {"slow": pytest.approx((t + timedelta(seconds=60)).timestamp(), abs=1e-3)}
    assert ledger()["rate_checked_at"] == t + timedelta(seconds=3) and ledger()["rate_checked_window"] == 8
    assert claim_limited(4, t + timedelta(seconds=4))[0] == []
    assert len(claim_limited(4, t + timedelta(seconds=61))[0]) == 4  # the first two left the window


def test_saving_a_queue_never_writes_its_ledger():
    lifecycle.set_limits("slow", rate_limit=10, rate_period=60)
    add_jobs(4)
    queue = Queue.objects.get(name="slow")  # read before the claims
    assert len(claim_limited(4)[0]) == 4
    queue.rate_limit = 20
    queue.save()
    assert ledger()["rate_starts"] == 4 and Queue.objects.get(name="slow").rate_limit == 20


def test_a_keyed_claim_of_a_rate_limited_queue_adds_its_starts_to_the_ledger():
    lifecycle.set_limits("slow", rate_limit=10, rate_period=60)
    specs = [{"task": ADD, "args": [i, i], "queue": "slow", "concurrency_key": f"k{i}"} for i in range(3)]
    lifecycle.enqueue_many(specs)
    jobs, _ = claim_keyed("w", queues=list(QUEUES), limit=4, lease=30)
    assert len(jobs) == 3 and ledger()["rate_starts"] == 3


def race(limit, jobs, *, threads=4, batch=2, seconds=None):
    """Dispatchers on ``threads`` threads claim ``batch`` at a time and finish at once; return every job's
    ``(claim returned, finish sent)`` (an interval inside the time it ran) and the claims' times."""
    add_jobs(jobs)
    spans, starts, errors = [], [], []
    lock = threading.Lock()
    deadline = time.monotonic() + (seconds or 30)

    def dispatcher(n):
        store = DjangoStore(f"race-{n}", lease=30)
        outcomes = []
        try:
            while time.monotonic() < deadline:
                now = time.time()
                claimed, _ = store.claim_limited(set(QUEUES), batch, now, finished=outcomes)
                returned = time.monotonic()
                outcomes = [
                    Outcome(j.id, store.worker_id, j.attempt, Status.SUCCEEDED, result_json="1") for j in claimed
                ]
                with lock:
                    starts.extend([now] * len(claimed))
                    spans.extend((returned, None, j.id) for j in claimed)
                if not claimed:
                    if not Job.objects.filter(status__in=["pending", "running"]).exists():
                        break
                    time.sleep(0.002)
                    continue
                time.sleep(0.001)  # the jobs "run"
                with lock:
                    sent = time.monotonic()
                    for i, (at, end, job_id) in enumerate(spans):
                        if end is None and job_id in {j.id for j in claimed}:
                            spans[i] = (at, sent, job_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            if outcomes:
                store.finish(outcomes, time.time())
            store.reset()
            connections.close_all()

    workers = [threading.Thread(target=dispatcher, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, errors
    return [(a, b) for a, b, _ in spans], starts


def test_dispatchers_racing_on_a_small_concurrency_limit_never_exceed_it():
    lifecycle.set_limits("slow", concurrency_limit=3)
    spans, _ = race(3, 120)
    assert len(spans) == 120
    assert most_at_once(spans) <= 3
    assert Job.objects.filter(status="succeeded").count() == 120


def test_dispatchers_racing_on_a_small_rate_limit_never_exceed_it():
    lifecycle.set_limits("slow", rate_limit=5, rate_period=0.5)
    _, starts = race(5, 1000, seconds=2.5)
    starts.sort()
    assert len(starts) >= 10
    # The window is the claims' own time: at most 5 starts in any half second of it.
    assert most_in_a_window(starts, 0.5) <= 5
