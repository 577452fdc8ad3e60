"""GET /api/jobs/{id}/logs/, logs_count, and GET /api/stats/history/."""

import pytest
from django.utils import timezone

from scheduler_app.models import Job, JobLog
from scheduler_app.observability import rollups
from scheduler_app.vocabulary.tallies import Tally

pytestmark = pytest.mark.django_db


@pytest.fixture
def job_with_logs(enqueue_job):
    job = enqueue_job()
    now = timezone.now()
    JobLog.objects.bulk_create(
        [
            JobLog(
                job=job,
                attempt=a,
                seq=i + 1,
                time=now,
                level=20 if i else 40,
                logger="app",
                message=f"a{a} m{i}",
                exc_text="" if i else "Traceback",
            )
            for a in (1, 2)
            for i in range(3)
        ]
    )
    Job.objects.filter(pk=job.pk).update(logs_count=6)
    return job


def test_logs_are_paginated_oldest_first_and_filtered_by_attempt(api, job_with_logs):
    body = api.get(f"/api/jobs/{job_with_logs.pk}/logs/?page_size=4").json()
    assert body["count"] == 6 and body["next"].endswith("page=2&page_size=4") or "page=2" in body["next"]
    assert [r["message"] for r in body["results"]] == ["a1 m0", "a1 m1", "a1 m2", "a2 m0"]
    first = body["results"][0]
    assert (first["level"], first["level_name"], first["logger"], first["exc_text"]) == (
        40,
        "ERROR",
        "app",
        "Traceback",
    )
    only = api.get(f"/api/jobs/{job_with_logs.pk}/logs/?attempt=2").json()
    assert [r["message"] for r in only["results"]] == ["a2 m0", "a2 m1", "a2 m2"]
    assert api.get(f"/api/jobs/{job_with_logs.pk}/").json()["logs_count"] == 6


@pytest.mark.parametrize("query", ["attempt=0", "attempt=x", "attempt=99999999999", "page_size=0"])
def test_bad_log_queries_are_400(api, job_with_logs, query):
    response = api.get(f"/api/jobs/{job_with_logs.pk}/logs/?{query}")
    assert response.status_code == 400, response.content


def test_logs_of_a_missing_job_are_404(api):
    assert api.get("/api/jobs/999999/logs/").status_code == 404


def test_history_document(api):
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    tally = Tally(started=2, succeeded=1, retried=1)
    tally.run.add(0.02)
    tally.run.add(2.0)
    rollups.record({(minute.timestamp(), "default", "a.b"): tally}, now)
    body = api.get("/api/stats/history/").json()
    assert body["minutes"] == 60 and body["bucket_seconds"] == 60 and len(body["buckets"]) == 60
    last = body["buckets"][-1]
    assert (last["started"], last["succeeded"], last["retried"], last["run"]["count"]) == (2, 1, 1, 2)
    assert body["totals"]["run"]["max"] == 2.0
    assert api.get("/api/stats/history/?minutes=1440&queue=default&task=a.b").json()["bucket_seconds"] == 600
    assert api.get("/api/stats/history/?minutes=10080&queue=").json()["totals"]["started"] == 2


@pytest.mark.parametrize("query", ["minutes=0", "minutes=10081", "minutes=x", "queue=" + "q" * 65, "task=%00"])
def test_bad_history_queries_are_400(api, query):
    response = api.get(f"/api/stats/history/?{query}")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [query.split("=")[0]]
