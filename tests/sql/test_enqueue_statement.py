"""The single enqueue's statement on PostgreSQL: one JSON row, a prepared statement per session, and its fallbacks."""

import contextlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from scheduler_app import lifecycle, schedules, sql
from scheduler_app.models import Job
from scheduler_app.sql import postgres
from tests.lifecycle.test_lifecycle import _listen, _notes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]
ADD = "tests.testapp.tasks.add"
NOOP = "tests.testapp.tasks.noop"
FIELDS = [f.attname for f in Job._meta.local_concrete_fields if f.attname != "id"]


@pytest.fixture
def fresh_session():
    """A new database session, and no memory of what earlier sessions prepared."""
    connection.close()
    postgres._PREPARED.sessions.clear()
    yield
    connection.close()


def prepared_statements():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'scheduler_enqueue_%%'")
        return cursor.fetchall()


def captured(django_assert_num_queries, count, **enqueue):
    with django_assert_num_queries(count) as ctx:
        job, created = lifecycle.enqueue(enqueue.pop("task", ADD), enqueue.pop("args", [1, 2]), **enqueue)
    assert created
    return job, [q["sql"] for q in ctx.captured_queries]


def test_the_json_row_stores_what_save_stores():
    user = User.objects.create(username="u")
    schedule = schedules.create(name="s", task=ADD, args=[1, 2], interval_seconds=60)
    later = timezone.now() + timedelta(days=3, microseconds=123457)
    specs = [
        {"task": ADD, "args": [1, 2]},
        {"task": NOOP, "args": [{"nested": [1, 2.5, None, True, 'é ☃ "quoted" \\ \' %s $1']}], "priority": -7},
        {"task": NOOP, "kwargs": {"value": {"deep": {"er": [[], {}]}}}, "queue": "slow", "execute_at": later},
        {"task": ADD, "args": [10**15, -3], "timeout": 2.75, "max_attempts": 9},
        {"task": NOOP, "args": ["", 0, False, None], "created_by": user, "schedule": schedule},
    ]
    for spec in specs:
        task, args, kwargs = spec.pop("task"), spec.pop("args", []), spec.pop("kwargs", {})
        fast, _ = lifecycle.enqueue(task, args, kwargs, **spec)
        slow = lifecycle.build_job(task, args, kwargs, **spec)
        slow.save()
        a, b = (Job.objects.filter(pk=j.pk).values(*FIELDS).get() for j in (fast, slow))
        ignore = {"created_at", "updated_at"} | ({"execute_at"} if "execute_at" not in spec else set())
        assert {k: v for k, v in a.items() if k not in ignore} == {k: v for k, v in b.items() if k not in ignore}
    assert {j.result for j in Job.objects.all()} == {None}
    assert {j.execute_at for j in Job.objects.filter(queue="slow")} == {later}  # microseconds kept


def test_a_value_without_a_json_form_takes_the_orms_insert():
    job = lifecycle.build_job(ADD, [1, 2])
    job.args = [float("nan")]  # no JSON form (the rules refuse it before this point)
    statement, params, types = sql.pg_insert_statement(job, channel="c", payload_parts=["a", "b"])
    assert types is None and len(params) > 4 and "json_to_recordset" not in statement


def test_the_first_enqueue_of_a_session_prepares_the_statement_and_later_ones_execute_it(
    fresh_session, django_assert_num_queries
):
    _, [first] = captured(django_assert_num_queries, 1)
    assert first.startswith("PREPARE scheduler_enqueue_") and "EXECUTE scheduler_enqueue_" in first
    _, [second] = captured(django_assert_num_queries, 1)
    assert second.startswith("EXECUTE scheduler_enqueue_")
    [(name, statement)] = prepared_statements()
    assert "INSERT INTO" in statement and "pg_notify" in statement and second.startswith(f"EXECUTE {name}(")
    with transaction.atomic():
        _, [inside] = captured(django_assert_num_queries, 1)
    assert inside.startswith("SAVEPOINT") and f"EXECUTE {name}(" in inside
    assert inside.endswith("RELEASE SAVEPOINT scheduler_enqueue")


@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "in a transaction"])
@pytest.mark.parametrize("how", ["DEALLOCATE ALL", "DISCARD ALL", "someone else's"])
def test_a_session_that_lost_or_already_has_the_statement_still_enqueues(fresh_session, in_transaction, how):
    """A pooler hands the connection another server session: the plain statement, the transaction intact."""
    lifecycle.enqueue(ADD, [0, 0])
    with connection.cursor() as cursor:
        if how == "someone else's":  # the name is taken in this session, but the tracker never saw it
            postgres._PREPARED.sessions.clear()
        elif not in_transaction or how != "DISCARD ALL":  # DISCARD ALL cannot run in a transaction
            cursor.execute(how)
        else:
            cursor.execute("DEALLOCATE ALL")
    conn = _listen()
    try:
        with transaction.atomic() if in_transaction else contextlib.nullcontext():
            job, created = lifecycle.enqueue(ADD, [5, 5])
            after, _ = lifecycle.enqueue(ADD, [6, 6])  # the transaction, if any, is still usable
        notes = _notes(conn)
    finally:
        conn.close()
    assert created and Job.objects.filter(pk__in=[job.pk, after.pk]).count() == 2
    missed = postgres._PREPARED.sessions[connection.connection].get("missed", 0)
    assert missed == (0 if how == "someone else's" else 1)  # the next enqueue prepares it again, or uses it
    assert len(prepared_statements()) == 1
    assert [n["jobs"][0][0] for n in notes] == [job.pk, after.pk]


def test_after_two_misses_a_session_sends_the_plain_statement(fresh_session, django_assert_num_queries):
    for _ in range(postgres._Prepared.MISSES):
        lifecycle.enqueue(ADD, [0, 0])
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
        lifecycle.enqueue(ADD, [0, 1])  # misses, then the plain statement
    _, [statement] = captured(django_assert_num_queries, 1)
    assert statement.startswith("WITH ins AS (INSERT INTO")
    assert prepared_statements() == []


def test_prepare_threshold_none_in_the_settings_means_plain_statements(fresh_session, django_assert_num_queries):
    options = connection.settings_dict.setdefault("OPTIONS", {})
    options["prepare_threshold"] = None
    try:
        for _ in range(3):
            _, [statement] = captured(django_assert_num_queries, 1)
            assert statement.startswith("WITH ins AS (INSERT INTO")
    finally:
        del options["prepare_threshold"]
    assert prepared_statements() == []
