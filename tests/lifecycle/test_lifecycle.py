"""The lifecycle service: every transition, and the races it must win or lose cleanly."""

import json
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.lifecycle import InvalidTransition, creation
from scheduler_app.models import Job, JobStatus
from scheduler_app.sql.postgres import pg_array
from scheduler_app.vocabulary.jobs import Outcome
from scheduler_app.vocabulary.policy import RetryPolicy
from tests.plumbing import at_once, claim

ADD = "tests.testapp.tasks.add"
QUEUES = ["default", "slow", "other"]


POLICY = RetryPolicy(base=0.05, jitter=0.0)


def failed(job, exc, now=None):
    return POLICY.raised(job, exc, now or timezone.now())


def succeeded(job, value):
    return POLICY.succeeded(job, value, timezone.now())


def claim_one(worker="w1", **kw):
    return claim(worker, queues=QUEUES, limit=kw.pop("limit", 1), lease=30, **kw)


@pytest.mark.django_db
class TestEnqueue:
    def test_defaults_come_from_the_task(self):
        job, created = lifecycle.enqueue("tests.testapp.tasks.important", [1])
        assert created
        assert (job.priority, job.queue, job.status) == (10, "other", "pending")
        assert job.max_attempts == 3

    def test_validation_names_each_field(self):
        with pytest.raises(ValidationError) as info:
            lifecycle.enqueue(
                "os.system",
                "notalist",
                {"x": object()},
                priority=500,
                queue="nope",
                max_attempts=0,
                timeout=-1,
                execute_at=timezone.now().replace(tzinfo=None),
            )
        errors = info.value.message_dict
        assert set(errors) >= {"task", "args", "priority", "max_attempts", "timeout", "execute_at"}
        assert "not a registered task" in errors["task"][0]
        assert Job.objects.count() == 0

    def test_unknown_queue(self):
        with pytest.raises(ValidationError) as info:
            lifecycle.enqueue(ADD, [1, 2], queue="nope")
        assert "Unknown queue" in info.value.message_dict["queue"][0]

    def test_unique_key_rejects_a_second_active_job_and_allows_one_after(self):
        first, created = lifecycle.enqueue(ADD, [1, 2], unique_key="k")
        again, created_again = lifecycle.enqueue(ADD, [3, 4], unique_key="k")
        assert created and not created_again and again.pk == first.pk
        lifecycle.cancel(first.pk)
        third, created_third = lifecycle.enqueue(ADD, [5, 6], unique_key="k")
        assert created_third and third.pk != first.pk

    def test_unique_key_is_enforced_by_the_database(self):
        from django.db import IntegrityError, transaction

        lifecycle.enqueue(ADD, [1, 2], unique_key="db")
        with pytest.raises(IntegrityError), transaction.atomic():
            Job.objects.create(task=ADD, unique_key="db")

    def test_enqueue_many_is_all_or_nothing(self):
        with pytest.raises(lifecycle.BulkValidationError) as info:
            lifecycle.enqueue_many([{"task": ADD, "args": [1, 2]}, {"task": "nope"}])
        assert list(info.value.by_index) == [1]
        assert Job.objects.count() == 0
        jobs = lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(5)])
        assert [j.args for j in jobs] == [[i, i] for i in range(5)]
        assert all(j.pk for j in jobs)

    def test_enqueue_many_takes_request_user_as_it_comes(self, staff_user):
        """request.user is a SimpleLazyObject: each job gets the user behind it, read once, and its row the id."""
        from django.utils.functional import SimpleLazyObject

        reads = []
        lazy = SimpleLazyObject(lambda: reads.append(1) or staff_user)
        jobs = lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(3)], created_by=lazy)
        assert reads == [1]
        assert all(type(j.created_by) is type(staff_user) and j.created_by.pk == staff_user.pk for j in jobs)
        assert set(Job.objects.values_list("created_by", flat=True)) == {staff_user.pk}

    def test_new_jobs_share_no_mutable_default(self):
        """Defaults are asked once per process; callable ones (lists, dicts, now) are still made per job."""
        from scheduler_app.lifecycle.rows import new_job

        a, b = new_job(task=ADD), new_job(task=ADD)
        assert a.errors == [] and a.errors is not b.errors and a.kwargs is not b.kwargs
        assert a.status == JobStatus.PENDING and a.max_attempts == b.max_attempts and a.pk is None
        with pytest.raises(TypeError, match="no field 'nope'"):
            new_job(task=ADD, nope=1)

    def test_a_new_job_is_the_instance_the_model_would_build_and_its_signals_are_kept(self, staff_user):
        """``new_job`` skips ``Job.__init__`` only while nobody listens to ``pre_init``/``post_init``."""
        from django.db.models.signals import post_init

        from scheduler_app.lifecycle.rows import new_job

        now = timezone.now()
        values = {"task": ADD, "args": [1, 2], "priority": 5, "created_by_id": staff_user.pk, "tags": ["a"]}
        values |= {"execute_at": now, "created_at": now, "updated_at": now}  # the callable defaults
        fast, model = new_job(**values), Job(**values)
        plain = {k: v for k, v in fast.__dict__.items() if k != "_state"}
        assert plain == {k: v for k, v in model.__dict__.items() if k != "_state"}
        assert fast._state.adding and fast._state.db is None and fast.created_by == staff_user
        seen = []

        def heard(sender, instance, **kwargs):
            seen.append(instance)

        post_init.connect(heard, sender=Job)
        try:
            made = new_job(**values)
        finally:
            post_init.disconnect(heard, sender=Job)
        assert seen == [made]
        made.save()
        assert Job.objects.get(pk=made.pk).tags == ["a"]

    def test_argument_shapes_are_checked_per_shape(self):
        """The signature check is kept per (task, number of args, keywords): each shape gets its own answer."""
        for args, kwargs, ok in [
            ([1, 2], {}, True),
            ([1], {}, False),
            ([1], {"b": 2}, True),
            ([1], {"c": 2}, False),
            ([1, 2], {}, True),
            ([], {"b": 1, "a": 2}, True),
            ([1, 2, 3], {}, False),
        ]:
            if ok:
                lifecycle.enqueue(ADD, args, kwargs)
            else:
                with pytest.raises(ValidationError, match="do not match"):
                    lifecycle.enqueue(ADD, args, kwargs)
        assert Job.objects.count() == 4


@pytest.mark.django_db
class TestTransitions:
    def test_cancel_pending_then_finished_is_409(self):
        job, _ = lifecycle.enqueue(ADD, [1, 2])
        assert lifecycle.cancel(job.pk) == "cancelled"
        job.refresh_from_db()
        assert job.status == "cancelled" and job.finished_at
        with pytest.raises(InvalidTransition):
            lifecycle.cancel(job.pk)

    def test_cancel_running_requests_cooperation(self):
        job, _ = lifecycle.enqueue(ADD, [1, 2])
        claim_one()
        assert lifecycle.cancel(job.pk) == "cancel_requested"
        job.refresh_from_db()
        assert job.status == "running" and job.cancel_requested

    def test_cancel_unknown(self):
        with pytest.raises(Job.DoesNotExist):
            lifecycle.cancel(999999)

    def test_retry_failed_keeps_errors_and_gives_one_more_attempt(self):
        job, _ = lifecycle.enqueue("tests.testapp.tasks.boom", max_attempts=1)
        (c,) = claim_one()
        won = lifecycle.finish([failed(c, ValueError("x"))])
        assert won == {job.pk}
        job.refresh_from_db()
        assert job.status == "failed" and len(job.errors) == 1
        retried = lifecycle.retry(job.pk)
        assert retried.status == "pending" and retried.max_attempts == 2
        assert len(retried.errors) == 1

    def test_retry_of_running_and_pending_is_409(self):
        job, _ = lifecycle.enqueue(ADD, [1, 2])
        with pytest.raises(InvalidTransition):
            lifecycle.retry(job.pk)
        claim_one()
        with pytest.raises(InvalidTransition):
            lifecycle.retry(job.pk)

    def test_reschedule_pending_and_409_when_finished(self):
        job, _ = lifecycle.enqueue(ADD, [1, 2])
        later = timezone.now() + timedelta(hours=1)
        job = lifecycle.reschedule(job.pk, execute_at=later, priority=7)
        assert (job.execute_at, job.priority) == (later, 7)
        with pytest.raises(ValidationError):
            lifecycle.reschedule(job.pk, priority=101)
        lifecycle.cancel(job.pk)
        with pytest.raises(InvalidTransition):
            lifecycle.reschedule(job.pk, priority=1)


@pytest.mark.django_db
class TestDispatcherTransitions:
    def test_claim_orders_by_priority_then_time_then_fifo(self):
        now = timezone.now()
        ids = {}
        for name, priority, age in [("low", -5, 30), ("high", 50, 1), ("old", 0, 20), ("new", 0, 10), ("tie", 0, 10)]:
            job, _ = lifecycle.enqueue(ADD, [1, 1], priority=priority, execute_at=now - timedelta(seconds=age))
            ids[job.pk] = name
        lifecycle.enqueue(ADD, [1, 1], priority=100, execute_at=now + timedelta(hours=1))
        claimed = claim_one(limit=10, now=now)
        assert [ids[c.id] for c in claimed] == ["high", "old", "new", "tie", "low"]
        assert all(c.attempt == 1 and c.worker == "w1" for c in claimed)

    def test_claimed_arguments_round_trip_and_empty_ones_are_never_shared(self):
        # The claim reads args and kwargs as JSON text; "[]" and "{}" skip the
        # parse, and each job still gets a list and a dict of its own.
        nested = ([1, 2.5, "é", None, [True, {"k": [1]}]], {"a": {"b": [1, 2]}, "ü": "ß", "n": None})
        full, _ = lifecycle.enqueue("tests.testapp.tasks.noop", *nested)
        empties = [lifecycle.enqueue("tests.testapp.tasks.noop")[0].pk for _ in range(2)]
        claimed = {c.id: c for c in claim_one(limit=10)}
        assert (claimed[full.pk].args, claimed[full.pk].kwargs) == nested
        a, b = (claimed[pk] for pk in empties)
        assert (a.args, a.kwargs, b.args, b.kwargs) == ([], {}, [], {})
        assert type(a.args) is list and type(a.kwargs) is dict
        a.args.append(1)
        a.kwargs["x"] = 1
        assert (b.args, b.kwargs) == ([], {})

    def test_claim_respects_limit_and_queues(self):
        for _ in range(3):
            lifecycle.enqueue(ADD, [1, 1])
        lifecycle.enqueue(ADD, [1, 1], queue="slow")
        assert len(claim("w", queues=["slow"], limit=5, lease=30)) == 1
        assert len(claim("w", queues=["default"], limit=2, lease=30)) == 2

    def test_two_claims_of_one_job_one_wins(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        assert [c.id for c in claim_one("a")] == [job.pk]
        assert claim_one("b") == []
        assert claim_one("a", ids=[job.pk]) == []

    def test_cancel_racing_a_claim_exactly_one_wins(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        assert lifecycle.cancel(job.pk) == "cancelled"
        assert claim_one() == []

    def test_finish_is_compare_and_set_on_the_attempt(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1], max_attempts=3)
        (first,) = claim_one("a")
        # The lease expires; the job is rescued and claimed again by b.
        Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert lifecycle.rescue_expired() == 1
        assert Job.objects.get(pk=job.pk).status == "pending"
        (second,) = claim_one("b")
        assert second.attempt == 2
        # a's late result changes nothing; b's counts.
        assert lifecycle.finish([succeeded(first, 1)]) == set()
        assert lifecycle.finish([succeeded(second, 2)]) == {job.pk}
        job.refresh_from_db()
        assert (job.status, job.result, job.worker, job.attempts) == ("succeeded", 2, "b", 2)
        assert job.errors[0]["exception_class"].endswith("LeaseExpired")
        assert job.worker_ids == ["a", "b"]

    def test_rescue_never_overwrites_a_finished_job(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        (c,) = claim_one()
        lifecycle.finish([succeeded(c, 2)])
        Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert lifecycle.rescue_expired() == 0
        job.refresh_from_db()
        assert job.status == "succeeded"

    def test_rescue_counts_attempts_and_fails_a_poison_pill(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1], max_attempts=2)
        for expected in ["pending", "failed"]:
            claim_one()
            Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
            assert lifecycle.rescue_expired() == 1
            assert Job.objects.get(pk=job.pk).status == expected
        job.refresh_from_db()
        assert job.status == "failed" and len(job.errors) == 2 and job.finished_at

    def test_failure_retries_with_backoff_then_fails(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1], max_attempts=2)
        (c,) = claim_one()
        now = timezone.now()
        outcome = failed(c, ValueError("bad"), now)
        assert outcome.status == "pending" and outcome.retry_at > now
        lifecycle.finish([outcome])
        job.refresh_from_db()
        assert job.status == "pending" and job.execute_at == outcome.retry_at
        assert job.errors[0]["message"] == "bad" and "ValueError" in job.errors[0]["exception_class"]
        (c2,) = claim_one(now=outcome.retry_at)
        lifecycle.finish([failed(c2, ValueError("worse"), now)])
        job.refresh_from_db()
        assert job.status == "failed" and [e["attempt"] for e in job.errors] == [1, 2]

    def test_finish_batch_mixed_outcomes(self):
        jobs = [lifecycle.enqueue(ADD, [i, i], max_attempts=1)[0] for i in range(3)]
        claimed = claim_one(limit=3)
        now = timezone.now()
        outcomes = [
            succeeded(claimed[0], {"n": 1}),
            failed(claimed[1], RuntimeError("x"), now),
            Outcome(claimed[2].id, "w1", 1, JobStatus.CANCELLED),
        ]
        assert lifecycle.finish(outcomes) == {j.pk for j in jobs}
        statuses = dict(Job.objects.values_list("pk", "status"))
        assert sorted(statuses.values()) == ["cancelled", "failed", "succeeded"]

    def test_unserializable_result_fails_the_attempt(self):
        lifecycle.enqueue(ADD, [1, 1])
        (c,) = claim_one()
        outcome = succeeded(c, object())
        assert outcome.status == "failed"
        assert "cannot be stored as JSON" in outcome.error["message"] and "object" in outcome.error["message"]
        assert "Traceback" in outcome.error["traceback"]

    def test_renew_reports_cancel_requests(self):
        a, _ = lifecycle.enqueue(ADD, [1, 1])
        b, _ = lifecycle.enqueue(ADD, [1, 1])
        claim_one(limit=2)
        lifecycle.cancel(b.pk)
        assert lifecycle.renew_leases("w1", lease=60) == {b.pk}
        assert Job.objects.get(pk=a.pk).lease_expires_at > timezone.now() + timedelta(seconds=50)

    def test_progress_is_recorded_with_its_time_for_the_current_attempt_only(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        (c,) = claim_one()
        now = timezone.now()
        assert lifecycle.set_progress(c.id, "w1", c.attempt, {"current": 3, "total": 4, "message": "m"}, now=now)
        job.refresh_from_db()
        assert job.progress == {"current": 3, "total": 4, "message": "m", "updated_at": now.isoformat()}
        assert not lifecycle.set_progress(c.id, "w2", c.attempt, {"current": 4, "total": 4, "message": ""})
        assert not lifecycle.set_progress(c.id, "w1", c.attempt + 1, {"current": 4, "total": 4, "message": ""})
        job.refresh_from_db()
        assert job.progress["current"] == 3

    def test_release_hands_attempts_back_and_take_back_returns_them_uncounted(self):
        job, _ = lifecycle.enqueue(ADD, [1, 1])
        (c,) = claim_one()
        assert lifecycle.release("w1", [(c.id, c.attempt)]) == {job.pk}
        job.refresh_from_db()
        assert (job.status, job.attempts, job.lease_expires_at) == ("running", 1, None)
        assert job.errors[-1]["exception_class"] == "scheduler_app.lifecycle.ReleasedAtShutdown"
        assert lifecycle.take_back() == (1, 0)  # "w1" holds no liveness lock: gone
        job.refresh_from_db()
        assert (job.status, job.attempts) == ("pending", 0)

    def test_prune_respects_retention(self):
        old, _ = lifecycle.enqueue(ADD, [1, 1])
        new, _ = lifecycle.enqueue(ADD, [1, 1])
        lifecycle.cancel(old.pk)
        lifecycle.cancel(new.pk)
        Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=40))
        assert lifecycle.prune(batch=1) == 1
        assert list(Job.objects.values_list("pk", flat=True)) == [new.pk]


@pytest.mark.django_db(transaction=True)
class TestQueryCounts:
    """The hot paths' round trips, pinned, as production runs them: in autocommit.

    (Under the non-transactional ``db`` fixture every statement would be
    wrapped in a savepoint of the test's transaction and count three.)
    """

    def test_enqueue_of_one_job(self, django_assert_num_queries):
        lifecycle.enqueue(ADD, [0, 0])  # the session prepares the INSERT once (test_enqueue_statement)
        if connection.vendor == "postgresql":
            # INSERT and NOTIFY in one prepared statement, its own transaction.
            with django_assert_num_queries(1) as ctx:
                lifecycle.enqueue(ADD, [1, 2])
            (statement,) = [q["sql"] for q in ctx.captured_queries]
            assert statement.startswith("EXECUTE scheduler_enqueue_")
        else:
            # No NOTIFY on SQLite: BEGIN IMMEDIATE, INSERT, COMMIT.
            with django_assert_num_queries(3) as ctx:
                lifecycle.enqueue(ADD, [1, 2])
            assert [q["sql"].split()[0] for q in ctx.captured_queries] == ["BEGIN", "INSERT", "COMMIT"]

    def test_enqueue_with_a_unique_key(self, django_assert_num_queries):
        lifecycle.enqueue(ADD, [0, 0], unique_key="warm")
        # The lookup of an active holder of the key, then the insert in a
        # transaction (PostgreSQL: BEGIN, INSERT, NOTIFY, COMMIT; SQLite:
        # BEGIN IMMEDIATE, INSERT, COMMIT).
        expected = 5 if connection.vendor == "postgresql" else 4
        with django_assert_num_queries(expected):
            job, created = lifecycle.enqueue(ADD, [1, 2], unique_key="k")
        assert created
        # A key an active job holds: the lookup only.
        with django_assert_num_queries(1):
            again, created = lifecycle.enqueue(ADD, [3, 4], unique_key="k")
        assert not created and again.pk == job.pk

    def test_claim_with_finished_outcomes(self, django_assert_num_queries):
        from scheduler_app import sql

        first, second, third = (lifecycle.enqueue(ADD, [i, i])[0] for i in range(3))
        done = claim_one(limit=2)
        outcomes = [succeeded(c, 0) for c in done]
        if connection.vendor == "postgresql":
            # Finish and claim in one statement: the text the dispatcher's own
            # connection prepares (DjangoStore._hot_connection()), here run on
            # Django's connection so that it is counted.
            texts = []
            with (
                django_assert_num_queries(1),
                connection.execute_wrapper(
                    lambda execute, sql_, params, many, ctx: texts.append(sql_) or execute(sql_, params, many, ctx)
                ),
            ):
                claimed = claim_one(limit=2, finished=outcomes)
            assert texts == [sql.pg_finish_and_claim_text(False, 2)]
        else:
            # The finish, then the claim: one statement each.
            with django_assert_num_queries(2):
                claimed = claim_one(limit=2, finished=outcomes)
        assert [c.id for c in claimed] == [third.pk]
        statuses = dict(Job.objects.values_list("pk", "status"))
        assert statuses == {first.pk: "succeeded", second.pk: "succeeded", third.pk: "running"}

    def test_claim_by_ids_with_finished_outcomes(self, django_assert_num_queries):
        first, second = (lifecycle.enqueue(ADD, [i, i])[0] for i in range(2))
        (done,) = claim_one(ids=[first.pk])
        with django_assert_num_queries(1 if connection.vendor == "postgresql" else 2):
            claimed = claim_one(ids=[second.pk], finished=[succeeded(done, 0)])
        assert [c.id for c in claimed] == [second.pk]
        assert Job.objects.get(pk=first.pk).status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_from_threads_never_share_a_job():
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(200)])

    def worker(name):
        got = []
        while batch := claim(name, queues=QUEUES, limit=7, lease=30):
            got.extend(c.id for c in batch)
        return got

    results = at_once(*(lambda name=f"t{i}": worker(name) for i in range(4)))
    claimed = [i for ids in results for i in ids]
    assert len(claimed) == 200 and len(set(claimed)) == 200
    assert Job.objects.filter(status="running").count() == 200
    assert connection.vendor in ("sqlite", "postgresql")


def _listen():
    from scheduler_app import conf
    from scheduler_app.sql import connections as pg

    conn = pg.connect("default")
    conn.execute(f'LISTEN "{conf.get("NOTIFY_CHANNEL")}"')
    return conn


def _notes(conn):
    """Return the notifications ``conn`` got before a marker sent now.

    PostgreSQL delivers notifications in commit order, so whatever the test
    committed arrives before the marker: no waiting to see if more come.
    """
    from scheduler_app import conf

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '\"marker\"')", [conf.get("NOTIFY_CHANNEL")])
    notes = []
    for note in conn.notifies(timeout=10):  # a hang guard
        payload = json.loads(note.payload)
        if payload == "marker":
            return notes
        notes.append(payload)
    raise AssertionError(f"the marker notification never came (got {notes})")


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
class TestEnqueueAnnounces:
    """PostgreSQL enqueues INSERT and NOTIFY in one statement: same payload as announce()."""

    def test_the_notify_and_the_signal_carry_the_new_job(self):
        from scheduler_app import signals

        received = []

        def receiver(sender, message, **kw):
            received.append(message.to_dict())

        signals.jobs_changed.connect(receiver)
        conn = _listen()
        try:
            at = timezone.now() + timedelta(seconds=30)
            job, created = lifecycle.enqueue(ADD, [1, 2], execute_at=at, priority=7, queue="slow")
            notes = _notes(conn)
        finally:
            signals.jobs_changed.disconnect(receiver)
            conn.close()
        expected = {"queues": ["slow"], "jobs": [[job.pk, at.timestamp(), 7, "slow"]]}
        assert created and job.pk and not job._state.adding
        assert notes == [expected] and received == [expected]
        stored = Job.objects.get(pk=job.pk)
        assert (stored.args, stored.priority, stored.queue, stored.execute_at) == ([1, 2], 7, "slow", at)

    def test_inside_a_transaction_that_rolls_back_nothing_is_created_or_sent(self):
        from django.db import transaction

        conn = _listen()
        try:
            with pytest.raises(RuntimeError), transaction.atomic():
                job, _ = lifecycle.enqueue(ADD, [1, 2])
                assert Job.objects.filter(pk=job.pk).exists()
                raise RuntimeError("roll back")
            notes = _notes(conn)
        finally:
            conn.close()
        assert notes == [] and Job.objects.count() == 0

    def test_a_failed_insert_leaves_the_callers_transaction_usable(self):
        from django.db import IntegrityError, transaction

        conn = _listen()
        try:
            with transaction.atomic():
                first, _ = lifecycle.enqueue(ADD, [1, 1])
                bad = lifecycle.build_job(ADD, [2, 2])
                bad.priority = 500  # past the check constraint: the INSERT fails
                with pytest.raises(IntegrityError):
                    creation._insert_and_announce(bad, "default")
                second, _ = lifecycle.enqueue(ADD, [3, 3])
            notes = _notes(conn)
        finally:
            conn.close()
        assert sorted(Job.objects.values_list("args", flat=True)) == [[1, 1], [3, 3]]
        assert [n["jobs"][0][0] for n in notes] == [first.pk, second.pk]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_array_literals_for_the_claim_statement_round_trip():

    values = ["default", 'with "quotes"', "back\\slash", "comma,brace}{", "", "NULL"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[], %s::bigint[]", [pg_array(values), pg_array([1, 2, 3])])
        assert cursor.fetchone() == (values, [1, 2, 3])


@pytest.mark.django_db
def test_sqlite_claims_by_query_walk_the_claim_index_and_housekeeping_gathers_statistics():
    """SQLite never analyses on its own; without statistics it sorted every pending row per claim."""
    from scheduler_app import sql

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's planner")
    now = timezone.now()
    captured = []
    with connection.execute_wrapper(
        lambda execute, sql_, params, many, ctx: captured.append((sql_, params)) or execute(sql_, params, many, ctx)
    ):
        sql.sqlite_claim(worker="w", queues=QUEUES, limit=4, now=now, lease_until=now + timedelta(seconds=30))
    ((statement, params),) = captured
    select = statement[statement.index("SELECT id") : statement.index("LIMIT")] + "LIMIT 4"
    with connection.cursor() as cursor:
        # SQLite's statement takes the SET values first, then the SELECT's (LIMIT last).
        set_values = statement[: statement.index("SELECT id")].count("%s")
        cursor.execute("EXPLAIN QUERY PLAN " + select, params[set_values:-1])
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "job_pending_claim_idx" in plan and "TEMP B-TREE" not in plan, plan
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(50)])
    Job.objects.filter(status=JobStatus.PENDING).exists()  # the table was queried
    sql.sqlite_optimize()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'scheduler_app_job'")
        assert cursor.fetchone()[0] > 0


@pytest.mark.django_db
def test_enqueue_many_works_out_each_tasks_defaults_for_its_own_jobs():
    # enqueue_many keeps the defaults precedence chose per task and backend
    # options (build_job's _memo): tasks, values given for some jobs only and
    # a bad setting, mixed in one call, each job gets its own.
    from django.test import override_settings

    from tests.testapp import tasks

    T = "tests.testapp.tasks."
    jobs = lifecycle.enqueue_many(
        [
            {"task": T + "with_options", "args": [1], "unique_key": "a"},
            {"task": T + "add", "args": [1, 2]},
            {"task": tasks.add, "args": [3, 4], "priority": 7, "queue": "slow"},
            {"task": T + "with_options", "args": [2], "unique_key": "b", "max_attempts": 2, "tags": ["t"]},
            {"task": T + "add", "args": [5, 6]},
        ]
    )
    got = [(j.queue, j.priority, j.max_attempts, j.timeout, j.tags) for j in jobs]
    assert got == [
        ("slow", 0, 5, 30, []),
        ("default", 0, 3, None, []),
        ("slow", 7, 3, None, []),
        ("slow", 0, 2, 30, ["t"]),
        ("default", 0, 3, None, []),
    ]
    with (
        override_settings(SCHEDULER={"DEFAULT_MAX_ATTEMPTS": 0}),
        pytest.raises(creation.BulkValidationError) as caught,
    ):
        lifecycle.enqueue_many([{"task": T + "add", "args": [1, 2]}, {"task": T + "add", "args": [3, 4]}])
    assert set(caught.value.by_index) == {0, 1}
    assert all("max_attempts" in errors for errors in caught.value.by_index.values())
