"""Concurrency keys in the service: one rule for every entry point, a claim that counts each key's running jobs."""

import threading
import time
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import connection, connections
from django.db.models import Count
from django.utils import timezone

from scheduler_app import lifecycle, options
from scheduler_app.models import Job
from scheduler_app.runtime.store import DjangoStore
from scheduler_app.sql import keys
from scheduler_app.sql.keys import choose
from scheduler_app.vocabulary.jobs import Outcome, Status
from tests import plumbing
from tests.plumbing import at_once, claim, claim_limited

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
KEYED = "tests.testapp.tasks.keyed_span"


def claim_keyed(limit=4, worker="w", queues=("default",), now=None):
    return plumbing.claim_keyed(worker, queues=list(queues), limit=limit, lease=30, now=now)


def test_a_job_takes_its_key_and_limit_from_the_caller_or_the_tasks_options():
    job, _ = lifecycle.enqueue(ADD, [1, 2], concurrency_key="tenant:7", concurrency_limit=3)
    assert (job.concurrency_key, job.concurrency_limit) == ("tenant:7", 3)
    made, _ = lifecycle.enqueue(KEYED, ["/tmp", 42])
    assert (made.concurrency_key, made.concurrency_limit) == ("account:42", 2)
    by_name, _ = lifecycle.enqueue(KEYED, [], {"marker_dir": "/tmp", "account_id": "a b"})
    assert by_name.concurrency_key == "account:a b"
    mine, _ = lifecycle.enqueue(KEYED, ["/tmp", 42], concurrency_key="mine", concurrency_limit=1)
    assert (mine.concurrency_key, mine.concurrency_limit) == ("mine", 1)
    plain, _ = lifecycle.enqueue(ADD, [1, 2])
    assert (plain.concurrency_key, plain.concurrency_limit) == (None, 1)


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"concurrency_key": "k" * 256}, "concurrency_key", "Must be text of at most 255 characters."),
        ({"concurrency_key": 5}, "concurrency_key", "Must be text of at most 255 characters."),
        (
            {"concurrency_key": "k", "concurrency_limit": 0},
            "concurrency_limit",
            "Must be a whole number from 1 to 100000.",
        ),
        ({"concurrency_limit": 2}, "concurrency_limit", "concurrency_limit needs a concurrency_key."),
    ],
)
def test_bad_keys_and_limits_are_field_errors(spec, field, message):
    with pytest.raises(ValidationError) as caught:
        lifecycle.enqueue(ADD, [1, 2], **spec)
    assert caught.value.message_dict[field] == [message]
    assert not Job.objects.exists()


def test_options_refuse_a_bad_key_template_at_import():
    def sync(account_id):
        return account_id

    with pytest.raises(ImproperlyConfigured, match="not a parameter of sync"):
        options(concurrency_key="account:{acount_id}")(sync)
    with pytest.raises(ImproperlyConfigured, match="Not a valid format string"):
        options(concurrency_key="account:{account_id")(sync)
    with pytest.raises(ImproperlyConfigured, match="not positions"):
        options(concurrency_key="account:{0}")(sync)
    with pytest.raises(ImproperlyConfigured, match="concurrency_limit"):
        options(concurrency_key="a:{account_id}", concurrency_limit=0)(sync)


def test_a_key_the_arguments_cannot_fill_is_a_field_error():
    with pytest.raises(ValidationError) as caught:
        lifecycle.enqueue(KEYED, ["/tmp"])  # account_id missing: the arguments' error, no key made
    assert "args" in caught.value.message_dict
    assert "concurrency_key" not in caught.value.message_dict


def test_choose_counts_running_and_taken_jobs_per_key_in_claim_order():
    candidates = [(1, "a", 2), (2, "a", 2), (3, "b", 1), (4, "a", 2), (5, "c", 1)]
    assert choose(candidates, {"a": 1}, 10) == ([1, 3, 5], True)
    assert choose(candidates, {}, 2) == ([1, 2], False)
    assert choose(candidates, {"a": 2, "b": 1, "c": 1}, 10) == ([], True)


def test_the_claim_holds_a_key_at_its_limit_and_takes_the_others():
    a = [lifecycle.enqueue(ADD, [i, i], concurrency_key="a", concurrency_limit=2)[0] for i in range(4)]
    b = lifecycle.enqueue(ADD, [9, 9], concurrency_key="b")[0]
    plain = lifecycle.enqueue(ADD, [7, 7])[0]
    jobs, held = claim_keyed(limit=10)
    assert sorted(j.id for j in jobs) == sorted([a[0].id, a[1].id, b.id, plain.id])
    assert held
    assert claim_keyed(limit=10) == ([], True)
    # The plain claim never takes a keyed job, whatever the limit.
    assert claim("w", queues=["default"], limit=10, lease=30) == []
    Job.objects.filter(pk=a[0].pk).update(status="succeeded")
    jobs, held = claim_keyed(limit=10)
    assert [j.id for j in jobs] == [a[2].id]
    assert held


def test_a_held_key_does_not_hold_back_jobs_below_it():
    for i in range(30):
        lifecycle.enqueue(ADD, [i, i], concurrency_key="busy", priority=50)
    others = [lifecycle.enqueue(ADD, [i, i], concurrency_key=f"k{i}")[0] for i in range(3)]
    plain = lifecycle.enqueue(ADD, [0, 0], priority=-50)[0]
    jobs, held = claim_keyed(limit=8)
    ids = {j.id for j in jobs}
    assert {o.id for o in others} | {plain.id} <= ids
    assert len(ids) == 5 and held


def test_paused_queues_and_expired_jobs_are_left_alone():
    lifecycle.enqueue(ADD, [1, 1], concurrency_key="k", queue="slow")
    lifecycle.pause_queue("slow")
    expired = lifecycle.enqueue(ADD, [1, 1], concurrency_key="k2", expires_in=10)[0]
    later = timezone.now() + timedelta(seconds=11)
    assert claim_keyed(queues=("slow", "default"), now=later) == ([], False)
    Job.objects.filter(pk=expired.pk).update(expires_at=later + timedelta(seconds=5))
    assert [j.id for j in claim_keyed(queues=("default",), now=later)[0]] == [expired.pk]


def test_keyed_jobs_of_a_limited_queue_obey_its_limits_too():
    lifecycle.set_limits("slow", concurrency_limit=2)
    plain = lifecycle.enqueue(ADD, [0, 0], queue="slow")[0]
    keyed = [lifecycle.enqueue(ADD, [i, i], concurrency_key=f"k{i}", queue="slow")[0] for i in range(4)]
    [running] = claim_limited("w", queues=["slow"], limit=1, lease=30)[0]
    assert running.id == plain.pk
    jobs, held = claim_keyed(queues=("slow",), limit=4)
    assert [j.id for j in jobs] == [keyed[0].pk] and held  # one slot of two left
    assert claim_limited("w", queues=["slow"], limit=4, lease=30)[0] == []  # the queue is full
    lifecycle.set_limits("slow", concurrency_limit=None, rate_limit=1, rate_period=60)
    jobs, held = claim_keyed(queues=("slow",), limit=4)
    assert [j.id for j in jobs] == [keyed[1].pk] and held  # one start a minute
    assert claim_keyed(queues=("slow",), limit=4) == ([], True)


@pytest.mark.django_db(transaction=True)
def test_a_claim_waits_for_another_claim_of_the_same_key_and_sees_it(monkeypatch):
    """A second claim of key K while a first one has counted but not committed takes no job of K.

    PostgreSQL: the second finds K's lock taken and skips the key (held);
    SQLite: it waits for the single writer, then counts the first's job.
    Without either, it would count K's running jobs from before the first's
    commit and take a second job of a key whose limit is 1.
    """
    for i in range(4):
        lifecycle.enqueue(ADD, [i, i], concurrency_key="K")
    counted, go = threading.Event(), threading.Event()
    real = keys._Choice.take

    def slow_take(self, candidates):
        real(self, candidates)
        if threading.current_thread().name == "first":
            counted.set()
            go.wait(10)

    monkeypatch.setattr(keys._Choice, "take", slow_take)
    results = {}

    def claimer(name):
        try:
            results[name] = claim_keyed(limit=2, worker=name)
        finally:
            connections.close_all()

    first = threading.Thread(target=claimer, args=("first",), name="first")
    first.start()
    assert counted.wait(10)
    second = threading.Thread(target=claimer, args=("second",), name="second")
    second.start()
    second.join(0.5)
    go.set()
    first.join(30)
    second.join(30)
    assert len(results["first"][0]) == 1
    assert results["second"] == ([], True)
    assert Job.objects.filter(status="running").count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_take_more_than_the_limit():
    """Threads each with their own connection claim one key's jobs at once: the limit holds (PostgreSQL's locks)."""
    for i in range(40):
        lifecycle.enqueue(ADD, [i, i], concurrency_key="shared", concurrency_limit=3)

    def claimer(n):
        return [job for _ in range(5) for job in claim_keyed(limit=2, worker=f"w{n}")[0]]

    taken = [job for jobs in at_once(*(lambda n=n: claimer(n) for n in range(6))) for job in jobs]
    assert len(taken) == 3
    assert Job.objects.filter(status="running", concurrency_key="shared").count() == 3
    assert connection.vendor in ("postgresql", "sqlite")


def test_the_keyed_claim_records_its_outcomes_first_and_counts_their_keys_as_free():
    """An outcome handed to the claim ends its job before the key's running jobs are counted: its key's next job starts."""
    first, _ = lifecycle.enqueue(ADD, [1, 1], concurrency_key="k", concurrency_limit=1)
    second, _ = lifecycle.enqueue(ADD, [2, 2], concurrency_key="k", concurrency_limit=1)
    [claimed], held = claim_keyed()
    assert claimed.id == first.pk and held
    done = Outcome(first.pk, "w", claimed.attempt, Status.SUCCEEDED, result_json="2")
    jobs, held = plumbing.claim_keyed("w", queues=["default"], limit=4, lease=30, finished=[done])
    assert [j.id for j in jobs] == [second.pk] and not held
    assert Job.objects.get(pk=first.pk).status == "succeeded"


@pytest.mark.django_db(transaction=True)  # the refused statement ends its transaction, as in autocommit
def test_an_outcome_the_database_refuses_fails_its_own_job_and_the_keyed_claim_goes_on():
    first, _ = lifecycle.enqueue(ADD, [1, 1], concurrency_key="k", concurrency_limit=1)
    second, _ = lifecycle.enqueue(ADD, [2, 2], concurrency_key="k", concurrency_limit=1)
    [claimed], _ = claim_keyed()
    refused = Outcome(first.pk, "w", claimed.attempt, Status.SUCCEEDED, result_json="{not json")
    jobs, held = plumbing.claim_keyed("w", queues=["default"], limit=4, lease=30, finished=[refused])
    assert [j.id for j in jobs] == [second.pk] and not held
    assert Job.objects.get(pk=first.pk).status == "failed"


@pytest.mark.django_db(transaction=True)
def test_dispatchers_finishing_and_claiming_keyed_jobs_at_once_never_pass_a_keys_limit():
    """Four stores (PostgreSQL: each with its loop's own connection) hand their outcomes to the keyed claim.

    The finish and the count share one transaction: a key's room comes from
    the jobs it ended, never from one another store still runs. A sampler on
    its own connection counts each key's running jobs all along.
    """
    limits = {"a": 2, "b": 1}
    lifecycle.enqueue_many(
        [
            {"task": ADD, "args": [i, i], "concurrency_key": key, "concurrency_limit": limit}
            for i in range(15)
            for key, limit in limits.items()
        ]
    )
    stop, errors, peaks = threading.Event(), [], {}
    finished_jobs = []

    def sampler():
        try:
            while not stop.is_set():
                for key, n in (
                    Job.objects.filter(status="running")
                    .values_list("concurrency_key")
                    .annotate(n=Count("pk"))
                    .order_by()
                ):
                    peaks[key] = max(peaks.get(key, 0), n)
        finally:
            connections.close_all()

    def dispatcher(n):
        store = DjangoStore(f"keyed-{n}", lease=30)
        outcomes = []
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                claimed, _ = store.claim_keyed({"default"}, 2, time.time(), finished=outcomes)
                finished_jobs.extend(o.job_id for o in outcomes)
                outcomes = [
                    Outcome(j.id, store.worker_id, j.attempt, Status.SUCCEEDED, result_json="1") for j in claimed
                ]
                if not claimed and not Job.objects.filter(status__in=["pending", "running"]).exists():
                    break
                time.sleep(0.002)  # the jobs "run"
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.reset()
            connections.close_all()

    watcher = threading.Thread(target=sampler)
    watcher.start()
    threads = [threading.Thread(target=dispatcher, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    stop.set()
    watcher.join(10)
    assert errors == []
    assert Job.objects.filter(status="succeeded").count() == 30 and len(set(finished_jobs)) == 30
    assert peaks and all(peaks[key] <= limit for key, limit in limits.items()), peaks
