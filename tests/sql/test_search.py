"""sql/search.py: the search side table follows the job table, and the planner can use its trigram index."""

import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.sql.search import SEARCH_INDEX, SEARCH_TABLE, TAGS_INDEX, search_matches, tagged
from tests.plumbing import ADD

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]


def documents():
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, document FROM {SEARCH_TABLE} ORDER BY job_id")
        return cursor.fetchall()


def test_every_insert_path_fills_the_side_table_and_deletes_empty_it():
    one, _ = lifecycle.enqueue(ADD, [1, 2], meta={"who": "Zoë"}, unique_key="k-1")
    many = lifecycle.enqueue_many([{"task": ADD, "args": [3, 4]}, {"task": ADD, "args": [5, 6], "kwargs": {}}])
    orm = Job.objects.create(task=ADD, args=["orm"])
    rows = dict(documents())
    assert set(rows) == {one.pk, *(j.pk for j in many), orm.pk}
    assert rows[one.pk] == 'TESTS.TESTAPP.TASKS.ADD K-1 [1, 2] {} {"WHO": "ZOË"}'
    Job.objects.filter(pk__in=[one.pk, orm.pk]).delete()
    assert {job_id for job_id, _ in documents()} == {j.pk for j in many}


def explain(queryset):
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        # Few rows here: whether the index *can* serve (the scale test times it at a million).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_planner_can_use_the_indexes():
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i], "tags": [f"t{i % 7}"]} for i in range(500)])
    lifecycle.enqueue(ADD, [0, 0], meta={"needle": "zqxjv-4711"})
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {SEARCH_TABLE}")
    plan = explain(Job.objects.filter(search_matches("zqxjv-47")))
    assert SEARCH_INDEX in plan, plan
    assert TAGS_INDEX in explain(Job.objects.filter(tagged(["t3", "t4"])))
