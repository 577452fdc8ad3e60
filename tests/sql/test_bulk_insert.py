"""enqueue_many's INSERT on PostgreSQL (one JSON document per batch) stores exactly what bulk_create would."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle, sql
from scheduler_app.lifecycle import creation
from scheduler_app.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]
ADD = "tests.testapp.tasks.add"
ECHO = "tests.testapp.tasks.noop"

FIELDS = [f.attname for f in Job._meta.local_concrete_fields if f.attname != "id"]


def specs(later=None):
    later = later or timezone.now() + timedelta(days=3, microseconds=123457)
    return [
        {"task": ADD, "args": [1, 2]},
        {"task": ECHO, "args": [{"nested": [1, 2.5, None, True, 'é ☃ "quoted" \\']}], "priority": -7},
        {"task": ECHO, "kwargs": {"value": {"deep": {"er": [[], {}]}}}, "queue": "slow", "execute_at": later},
        {"task": ADD, "args": [10**15, -3], "timeout": 2.75, "max_attempts": 9, "unique_key": "bulk-a"},
        {"task": ECHO, "args": ["", 0, False, None]},
    ]


def stored(jobs):
    rows = {j.pk: j for j in Job.objects.filter(pk__in=[j.pk for j in jobs])}
    return [{f: getattr(rows[j.pk], f) for f in FIELDS} for j in jobs]


def test_the_json_insert_stores_what_bulk_create_stores(monkeypatch):
    later = timezone.now() + timedelta(days=3, microseconds=123457)
    fast = lifecycle.enqueue_many(specs(later))
    Job.objects.filter(unique_key="bulk-a").update(unique_key="bulk-b")  # free the key for the second run
    monkeypatch.setattr(sql.dialect(), "insert_many", lambda jobs, using: False)  # the bulk_create path
    slow = lifecycle.enqueue_many(specs(later))
    assert [j.pk for j in fast] == sorted(j.pk for j in fast)  # ids in the order of the items
    ignore = {"created_at", "updated_at", "unique_key", "execute_at"}  # now, or a key freed above
    for a, b in zip(stored(fast), stored(slow), strict=True):
        assert {k: v for k, v in a.items() if k not in ignore} == {k: v for k, v in b.items() if k not in ignore}
    assert stored(fast)[2]["execute_at"] == stored(slow)[2]["execute_at"] == later  # microseconds kept
    assert stored(fast)[0]["result"] is None and stored(fast)[0]["progress"] is None


def test_the_returned_jobs_have_their_ids_and_are_saved():
    jobs = lifecycle.enqueue_many(specs())
    assert all(j.pk and not j._state.adding and j._state.db == "default" for j in jobs)
    for job in jobs:
        row = Job.objects.get(pk=job.pk)
        assert (row.task, row.args, row.kwargs, row.priority) == (job.task, job.args, job.kwargs, job.priority)


def test_batches_of_bulk_batch_rows(monkeypatch):
    monkeypatch.setattr(creation, "BULK_BATCH", 2)
    jobs = lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(5)])
    assert [Job.objects.get(pk=j.pk).args for j in jobs] == [[i, i] for i in range(5)]


def test_a_value_without_a_json_form_falls_back_to_bulk_create():
    # No JSON form for a datetime in a JSON column: pg_bulk_insert says so and sends nothing.
    job = Job(task=ADD, args=[datetime(2026, 1, 1, tzinfo=UTC)])
    assert sql.pg_bulk_insert([job]) is None and job.pk is None
