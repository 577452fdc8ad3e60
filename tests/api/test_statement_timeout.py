"""Issue 34: no statement of an admin page or an API request runs longer than REQUEST_STATEMENT_TIMEOUT.

A list whose query the database cannot answer quickly is cancelled by the
database (PostgreSQL's statement_timeout; SQLite: a progress handler) and
answers a 503 that says so: JSON in the API, a page (or JSON for a feed) in
the admin. Requests run in autocommit here (``transaction=True``), as they
do in production.
"""

import pytest
from django.db import connection

from scheduler_app.admin.jobs import JobAdmin
from scheduler_app.api.views import JobViewSet

pytestmark = pytest.mark.django_db(transaction=True)

# A condition that takes far longer than the bound to evaluate for the first row.
SLOW = {
    "postgresql": "pg_sleep(30) IS NOT NULL",
    "sqlite": "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c) > 0",
}[connection.vendor]


@pytest.fixture
def bounded(settings, job_row):
    settings.SCHEDULER = {**settings.SCHEDULER, "REQUEST_STATEMENT_TIMEOUT": 0.3}
    job_row()


@pytest.fixture
def slow_lists(monkeypatch):
    def slow(get_queryset):
        return lambda self, *args: get_queryset(self, *args).extra(where=[SLOW])

    monkeypatch.setattr(JobViewSet, "get_queryset", slow(JobViewSet.get_queryset))
    monkeypatch.setattr(JobAdmin, "get_queryset", slow(JobAdmin.get_queryset))


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client


def statement_timeout():
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


def test_the_api_answers_503_json_when_a_statement_runs_past_the_bound(bounded, slow_lists, api):
    response = api.get("/api/jobs/")
    assert response.status_code == 503, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    assert "REQUEST_STATEMENT_TIMEOUT" in response.json()["detail"]
    assert api.get("/api/queues/").status_code == 200  # the connection serves the next request


def test_the_admin_says_so_when_a_statement_runs_past_the_bound(bounded, slow_lists, admin_client_):
    response = admin_client_.get("/admin/scheduler_app/job/")
    assert response.status_code == 503
    assert b"REQUEST_STATEMENT_TIMEOUT" in response.content and b"Narrow the list" in response.content
    feed = admin_client_.get("/admin/scheduler_app/job/live/?ids=1", HTTP_ACCEPT="application/json")
    assert feed.status_code in (200, 503)  # the feed reads ids, not the slow list
    assert admin_client_.get("/admin/scheduler_app/queue/").status_code == 200


def test_without_a_bound_nothing_is_cancelled(settings, job_row, api):
    settings.SCHEDULER = {**settings.SCHEDULER, "REQUEST_STATEMENT_TIMEOUT": 0}
    job_row()
    assert api.get("/api/jobs/").status_code == 200


@pytest.mark.postgres_only
def test_the_bound_is_the_requests_own(bounded, api, admin_client_):
    before = statement_timeout()
    assert api.get("/api/jobs/").status_code == 200
    assert admin_client_.get("/admin/scheduler_app/job/").status_code == 200
    assert statement_timeout() == before  # reset after the request: the connection's other users are not bound


def test_metrics_answer_503_when_a_statement_runs_past_the_bound(bounded, admin_client_, monkeypatch):
    from scheduler_app.models import Job
    from scheduler_app.observability import metrics

    monkeypatch.setattr(metrics, "render", lambda: str(Job.objects.extra(where=[SLOW]).count()).encode())
    response = admin_client_.get("/metrics")
    assert response.status_code == 503
    assert b"REQUEST_STATEMENT_TIMEOUT" in response.content
