"""The keyed claim in one statement on the dispatcher's own connection (PostgreSQL): the same choice as ``claim_keyed``.

``sql.keyed_claim.pg_claim_keyed`` runs the steps of ``sql.keys.claim_keyed`` in a
function of the session's own; the tests hold the two to the same answers on
random backlogs, and check what only the statement does: the outcomes first,
another claim's key lock, limited queues handed back, a session that lost
its function.
"""

import importlib
import random
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from scheduler_app import lifecycle, sql
from scheduler_app.lifecycle.finishing import finish_rows
from scheduler_app.models import Job, Queue
from scheduler_app.sql import keyed_claim, keys
from scheduler_app.vocabulary.jobs import Outcome, Status

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]
ADD = "tests.testapp.tasks.add"


@pytest.fixture
def hot():
    raw = sql.dialect().hot_connection()
    yield raw
    raw.close()


def both(hot, *, limit, queues=("default", "slow"), in_flight=(), now=None):
    """Return ``(the Python claim's (ids, held), the statement's (ids, held))`` on the same rows.

    The Python claim runs first in a transaction that is rolled back (its
    locks go with it); then the statement claims for real.
    """
    now = now or timezone.now()
    lease = now + timedelta(seconds=30)
    common = {
        "worker": "w",
        "queues": sorted(queues),
        "limit": limit,
        "now": now,
        "lease_until": lease,
        "in_flight": sorted(in_flight),
    }
    with transaction.atomic():
        _, rows, held = keys.claim_keyed(**common)
        python = (sorted(r[0] for r in rows), held)  # an UPDATE returns rows in no order
        transaction.set_rollback(True)
    won, rows, held = keyed_claim.pg_claim_keyed([], connection=hot, **common)
    assert won == {}
    return python, (sorted(r[0] for r in rows), held)


@pytest.mark.parametrize("seed", range(16))
def test_the_statement_chooses_what_the_python_claim_chooses(hot, seed):
    rng = random.Random(seed)
    now = timezone.now()
    keys_ = {f"k{i}": rng.randint(1, 3) for i in range(rng.randint(1, 6))}
    specs = []
    for _ in range(rng.randint(5, 40)):
        key = rng.choice([*keys_, None])
        spec = {
            "task": ADD,
            "args": [1, 2],
            "priority": rng.randint(-2, 2),
            "queue": rng.choice(["default", "slow"]),
            "execute_at": now - timedelta(seconds=rng.randint(0, 100)),
        }
        if key is not None:
            spec |= {"concurrency_key": key, "concurrency_limit": keys_[key]}
        if rng.random() < 0.1:
            spec["execute_at"] = now + timedelta(hours=1)  # not due
        if rng.random() < 0.1:
            spec["expires_at"] = now + timedelta(seconds=1)
        specs.append(spec)
    jobs = lifecycle.enqueue_many(specs)
    # Some keys already run jobs (another dispatcher's claims, its leases live).
    for job in rng.sample(jobs, k=min(len(jobs), rng.randint(0, 6))):
        Job.objects.filter(pk=job.pk, status="pending").update(status="running", worker="other")
    if rng.random() < 0.3:
        Queue.objects.filter(name="slow").update(paused=True)
    in_flight = [j.pk for j in rng.sample(jobs, k=min(len(jobs), 2))]
    python, statement = both(hot, limit=rng.randint(1, 6), in_flight=in_flight, now=now + timedelta(seconds=2))
    assert statement == python


def ends_the_first_and_starts_the_second(claim):
    """Two jobs of one key of limit 1: ``claim`` (``pg_claim_keyed``'s arguments) takes the first and holds the
    second; handed the first's outcome, it records it first and takes the second."""
    first, _ = lifecycle.enqueue(ADD, [1, 1], concurrency_key="k", concurrency_limit=1)
    second, _ = lifecycle.enqueue(ADD, [2, 2], concurrency_key="k", concurrency_limit=1)
    now = timezone.now()
    at = {"worker": "w", "queues": ["default"], "limit": 4, "now": now, "lease_until": now + timedelta(seconds=30)}
    _, [row], held = claim([], **at)
    assert row[0] == first.pk and held
    done = Outcome(first.pk, "w", 1, Status.SUCCEEDED, result_json="2")
    won, rows, held = claim(finish_rows([done]), **at)
    assert won == {first.pk: "succeeded"} and [r[0] for r in rows] == [second.pk] and not held
    assert Job.objects.get(pk=first.pk).result == 2


def test_the_outcomes_are_recorded_first_and_their_keys_have_room_again(hot):
    ends_the_first_and_starts_the_second(lambda rows, **at: keyed_claim.pg_claim_keyed(rows, connection=hot, **at))


def test_a_key_another_claim_holds_is_skipped_and_held(hot):
    lifecycle.enqueue(ADD, [1, 1], concurrency_key="locked", concurrency_limit=5)
    free, _ = lifecycle.enqueue(ADD, [2, 2], concurrency_key="free", concurrency_limit=5)
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:  # another claim, in its transaction
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext('locked'))", [keys.KEY_LOCKS])
        _, rows, held = keyed_claim.pg_claim_keyed(
            [],
            worker="w",
            queues=["default"],
            limit=4,
            now=now,
            lease_until=now + timedelta(seconds=30),
            connection=hot,
        )
    assert [r[0] for r in rows] == [free.pk] and held


def test_limited_queues_are_left_to_the_claim_that_takes_their_turn(hot):
    Queue.objects.update_or_create(name="slow", defaults={"concurrency_limit": 1})
    job, _ = lifecycle.enqueue(ADD, [1, 1], queue="slow", concurrency_key="k", concurrency_limit=5)
    other, _ = lifecycle.enqueue(ADD, [2, 2], queue="slow", concurrency_key="k", concurrency_limit=5)
    now = timezone.now()
    won, rows, _ = keyed_claim.pg_claim_keyed(
        [], worker="w", queues=["slow"], limit=4, now=now, lease_until=now + timedelta(seconds=30), connection=hot
    )
    assert rows is None and won == {}
    won, rows, held = sql.dialect().finish_and_claim_keyed(
        [], worker="w", queues=["slow"], limit=4, now=now, lease_until=now + timedelta(seconds=30), connection=hot
    )
    assert [r[0] for r in rows] == [job.pk] and held  # the queue's limit of 1, not the key's 5
    assert Job.objects.get(pk=other.pk).status == "pending"


def test_the_installed_function_is_the_one_the_code_makes():
    """The migration's frozen text is what ``function_text`` builds from the claims' texts today."""
    migration = importlib.import_module("scheduler_app.migrations.0020_keyed_claim_function")
    assert keyed_claim.function_text() == migration.CREATE
    assert migration.FUNCTION == keyed_claim.FUNCTION


def test_a_session_reset_by_a_pooler_still_claims_in_one_statement(hot):
    """The function is the database's, not the session's: DISCARD ALL (a pooler's reset) loses nothing."""
    job, _ = lifecycle.enqueue(ADD, [1, 1], concurrency_key="k")
    now = timezone.now()
    hot.execute("DISCARD ALL")
    _, rows, _ = keyed_claim.pg_claim_keyed(
        [], worker="w", queues=["default"], limit=1, now=now, lease_until=now + timedelta(seconds=30), connection=hot
    )
    assert [r[0] for r in rows] == [job.pk]


def test_without_the_function_the_keyed_claim_runs_as_a_transaction(hot, monkeypatch, caplog):
    """A database whose migrations have not installed it yet: the keyed claim of several statements."""

    class Missing(Exception):
        sqlstate = "42883"  # undefined_function

    def missing(connection, params):
        raise Missing("function scheduler_keyed_claim_v2(...) does not exist")

    monkeypatch.setattr(keyed_claim, "_execute", missing)
    monkeypatch.setattr(keyed_claim, "_missing_said", threading.Event())
    now = timezone.now()
    assert (
        keyed_claim.pg_claim_keyed(
            [], worker="w", queues=["default"], limit=4, now=now, lease_until=now, connection=hot
        )
        is None
    )
    assert "manage.py migrate" in caplog.text
    ends_the_first_and_starts_the_second(
        lambda rows, **at: sql.dialect().finish_and_claim_keyed(rows, connection=hot, **at)
    )
