"""sql/search.py: the search side table follows the job table, and the planner can use its trigram index."""

import pytest
from django.db import connection

from scheduler_app import lifecycle
from scheduler_app.models import Job
from scheduler_app.sql.base import TABLE
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


def search_page(term):
    from django.http import QueryDict

    from scheduler_app.api.filters import JobFilter

    filterset = JobFilter(QueryDict(f"search={term}"), queryset=Job.objects.order_by("-id"))
    assert filterset.is_valid(), filterset.errors
    return filterset.qs


def subplans(plan):
    """Yield the text of each SubPlan of ``plan`` (the lines indented under it): what runs once per row."""
    lines = plan.splitlines()
    for n, line in enumerate(lines):
        if line.strip().startswith("SubPlan"):
            depth = len(line) - len(line.lstrip())
            for inner in lines[n + 1 :]:
                if len(inner) - len(inner.lstrip()) <= depth:
                    break
                yield inner


def test_a_number_finds_the_id_and_the_text_by_a_join_not_a_scan_of_the_jobs():
    """Issue 34: ``id IN (...) OR id = N`` ran its subquery once per job (no answer at 300,000 jobs)."""
    lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(300)])
    target = Job.objects.order_by("pk")[10]
    holder, _ = lifecycle.enqueue(ADD, [0, 0], meta={"ref": f"x{target.pk}x"})
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}, {SEARCH_TABLE}")
    found = set(search_page(str(target.pk)).values_list("pk", flat=True))
    assert {target.pk, holder.pk} <= found  # both the id and the text still match
    for term in (str(target.pk), "7", "123456"):
        plan = explain(search_page(term)[:51])
        assert f"Seq Scan on {TABLE} " not in plan + " ", plan
        assert SEARCH_TABLE not in "".join(subplans(plan)), plan  # a semi-join, not a subquery run per row
