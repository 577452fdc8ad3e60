"""Pagination of GET /api/jobs/ and /api/workers/: bounded counts, links, errors."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler_app.api.pagination import EstimatedCountPagination
from scheduler_app.models import Job
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def seed(n, **fields):
    now = timezone.now()
    Job.objects.bulk_create(
        [Job(task=ADD, args=[i, 0], execute_at=now, created_at=now, updated_at=now, **fields) for i in range(n)]
    )


def test_envelope_and_links(api):
    seed(7)
    first = api.get("/api/jobs/?page_size=3").json()
    assert list(first) == ["count", "count_exact", "next", "previous", "results"]
    assert (first["count"], first["count_exact"], first["previous"]) == (7, True, None)
    assert first["next"] == "http://testserver/api/jobs/?page=2&page_size=3"
    second = api.get(first["next"]).json()
    assert second["previous"] == "http://testserver/api/jobs/?page_size=3"
    assert second["next"].endswith("page=3&page_size=3")
    third = api.get(second["next"]).json()
    assert third["next"] is None and len(third["results"]) == 1
    assert third["count"] == 7
    seen = [j["id"] for page in (first, second, third) for j in page["results"]]
    assert seen == sorted(Job.objects.values_list("pk", flat=True), reverse=True)


def test_links_keep_the_filters(api):
    seed(4)
    body = api.get("/api/jobs/?status=pending&ordering=id&page_size=2").json()
    assert "status=pending" in body["next"] and "ordering=id" in body["next"]


def test_default_page_size_is_50(api):
    seed(51)
    body = api.get("/api/jobs/").json()
    assert len(body["results"]) == 50 and body["count"] == 51


def test_empty_list(api):
    body = api.get("/api/jobs/").json()
    assert body == {"count": 0, "count_exact": True, "next": None, "previous": None, "results": []}


@pytest.mark.parametrize("page", ["0", "-1", "abc", "2", "99999999999999999999", "last"])
def test_invalid_page_is_404(api, page):
    seed(2)
    response = api.get(f"/api/jobs/?page={page}")
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid page."}


def test_count_is_capped_and_flagged(api, monkeypatch):
    monkeypatch.setattr(EstimatedCountPagination, "count_limit", 20)
    seed(45)
    body = api.get("/api/jobs/?page_size=10").json()
    assert body["count_exact"] is False
    assert body["count"] >= 21
    if connection.vendor != "postgresql":
        assert body["count"] == 21
    # The last page knows the exact count without counting.
    last = api.get("/api/jobs/?page_size=10&page=5").json()
    assert (last["count"], last["count_exact"], len(last["results"])) == (45, True, 5)
    # Under the cap the count is exact.
    assert api.get("/api/jobs/?page_size=10&status=running").json()["count"] == 0


def test_count_never_scans_past_the_cap(api, monkeypatch):
    """The COUNT runs over a LIMITed subquery; the last page runs no COUNT at all."""
    monkeypatch.setattr(EstimatedCountPagination, "count_limit", 20)
    seed(45)
    with CaptureQueriesContext(connection) as ctx:
        api.get("/api/jobs/?page_size=10")
    counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1
    assert "LIMIT 21" in counts[0].upper()
    with CaptureQueriesContext(connection) as ctx:
        api.get("/api/jobs/?page_size=10&page=5")
    assert not [q for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]


def test_list_query_count_is_constant(api, django_assert_max_num_queries, enqueue_job, staff_user):
    for _ in range(30):
        enqueue_job(created_by=staff_user)
    # Token auth, the user's and their groups' permissions, the page (with
    # created_by joined), the bounded count.
    with django_assert_max_num_queries(6):
        body = api.get("/api/jobs/?page_size=10").json()
    assert body["results"][0]["created_by"] == "staff"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="planner estimates are PostgreSQL's")
def test_postgresql_reports_the_planner_estimate(api, monkeypatch):
    monkeypatch.setattr(EstimatedCountPagination, "count_limit", 100)
    seed(3000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE scheduler_app_job")
    body = api.get("/api/jobs/?page_size=10").json()
    assert body["count_exact"] is False
    assert 1500 <= body["count"] <= 6000
