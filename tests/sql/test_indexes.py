"""sql/indexes.py (migration 0014): a claim and a finish of a plain job write no list index entry.

Issue 28: every row version the dispatcher writes takes an entry in each
index whose predicate it meets. The rule the layout keeps, checked on the
migrated table: besides the primary key, every index of the job table is
partial or BRIN, and no partial index holds a plain job (untagged, keyless,
outside a workflow) while it runs or after it succeeded.
"""

import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.sql.indexes import LISTED_STATUSES, TABLE
from scheduler_app.vocabulary.jobs import Status
from tests.plumbing import ADD

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]


def index_definitions():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE])
        return dict(cursor.fetchall())


def test_every_index_but_the_primary_key_is_partial_or_brin():
    full = {
        name: definition
        for name, definition in index_definitions().items()
        if not name.endswith("_pkey") and " WHERE " not in definition and "USING brin" not in definition
    }
    assert full == {}, "a full index takes an entry for every claim and finish: " + repr(full)


def test_the_list_indexes_have_the_layout_of_0014():
    definitions = index_definitions()
    assert "job_queue_id_idx" not in definitions and "job_task_id_idx" not in definitions
    assert "USING brin (created_at)" in definitions["job_created_at_idx"]
    assert "WHERE (tags <> '[]'::jsonb)" in definitions["job_tags_gin_idx"]
    for status in LISTED_STATUSES:
        assert f"'{status}'" in definitions["job_status_id_idx"]
    for status in (Status.PENDING, Status.RUNNING, Status.SUCCEEDED):
        assert f"'{status}'" not in definitions["job_status_id_idx"]


def index_tuples(statuses):
    """Return, per index, how many of the jobs in ``statuses`` it holds an entry for (bitmap index scans)."""
    counts = {}
    with connection.cursor() as cursor:
        for name, definition in index_definitions().items():
            if " WHERE " not in definition:
                continue
            predicate = definition.split(" WHERE ", 1)[1]
            cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE status = ANY(%s) AND {predicate}", [list(statuses)])
            counts[name] = cursor.fetchone()[0]
    return counts


def test_a_plain_job_running_or_succeeded_is_in_no_partial_index_but_the_lease_and_finished_ones():
    jobs = lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(6)])
    running, succeeded = [j.pk for j in jobs[:3]], [j.pk for j in jobs[3:]]
    Job.objects.filter(pk__in=running).update(status=Status.RUNNING)
    Job.objects.filter(pk__in=succeeded).update(status=Status.SUCCEEDED)
    holding = {name for name, n in index_tuples([Status.RUNNING, Status.SUCCEEDED]).items() if n}
    assert holding == {"job_running_lease_idx", "job_finished_idx"}


def test_a_failed_job_is_listed_by_the_status_index():
    job, _ = lifecycle.enqueue(ADD, [1, 2])
    Job.objects.filter(pk=job.pk).update(status=Status.FAILED)
    assert index_tuples([Status.FAILED])["job_status_id_idx"] == 1


def plan(queryset):
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        # Few rows here: whether an index *can* serve it (a seq scan is then the only way left).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")  # not the primary key's order: the status's own indexes
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_active_jobs_are_read_through_the_partial_indexes():
    # The dashboard counts the active jobs of a table of millions of finished
    # ones: ``status IN (...)`` implies no partial index's predicate and was a
    # scan of the table once job_status_id_idx stopped holding every status.
    from django.db.models import Count

    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(20)])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}")
    for queryset in (
        Job.objects.active().order_by(),
        Job.objects.active().order_by().values("queue").annotate(n=Count("id")),
    ):
        text = plan(queryset)
        assert f"Seq Scan on {TABLE}" not in text, text
        assert "job_status_id_idx" in text and "job_running_lease_idx" in text, text


def test_the_api_status_filter_is_read_through_the_partial_indexes():
    from django.http import QueryDict

    from scheduler_app.api.filters import JobFilter

    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(20)])
    filterset = JobFilter(QueryDict("status=pending,running,pending"), queryset=Job.objects.order_by())
    assert filterset.is_valid(), filterset.errors
    text = plan(filterset.qs)
    assert f"Seq Scan on {TABLE}" not in text and "job_running_lease_idx" in text, text
