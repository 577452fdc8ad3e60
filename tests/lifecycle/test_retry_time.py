"""A retried job keeps a time still ahead unless the operator says now: one rule (actions.retried) for every door."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobStatus
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db


def cancelled_ahead(hours=2):
    at = (timezone.now() + timedelta(hours=hours)).replace(microsecond=0)
    job = lifecycle.enqueue(ADD, [1, 2], execute_at=at)[0]
    lifecycle.cancel(job.pk)
    return job, at


def failed_past(job_row):
    return job_row(JobStatus.FAILED, execute_at=timezone.now() - timedelta(hours=1))


def test_a_job_cancelled_before_its_time_keeps_it_unless_now(job_row):
    kept, at = cancelled_ahead()
    job = lifecycle.retry(kept.pk)
    assert (job.status, job.execute_at) == (JobStatus.PENDING, at)
    forced, _ = cancelled_ahead()
    before = timezone.now()
    job = lifecycle.retry(forced.pk, run_now=True)
    assert before <= job.execute_at <= timezone.now()
    past = failed_past(job_row)
    before = timezone.now()
    job = lifecycle.retry(past.pk)  # a time gone by: due now
    assert before <= job.execute_at <= timezone.now()


@pytest.mark.parametrize("run_now", [False, True])
def test_bulk_retries_follow_the_same_rule(job_row, run_now):
    ahead = [cancelled_ahead() for _ in range(3)]
    keyed = lifecycle.enqueue(ADD, [9, 9], execute_at=ahead[0][1], unique_key="k-1")[0]  # one by one (its key)
    lifecycle.cancel(keyed.pk)
    past = failed_past(job_row)
    before = timezone.now()
    assert lifecycle.retry_matching(Job.objects.all(), run_now=run_now) == 5
    for job, at in [*ahead, (keyed, ahead[0][1])]:
        job.refresh_from_db()
        assert job.status == JobStatus.PENDING
        assert (before <= job.execute_at <= timezone.now()) if run_now else job.execute_at == at
    past.refresh_from_db()
    assert before <= past.execute_at <= timezone.now()
    ids = [j.pk for j, _ in ahead]
    lifecycle.cancel_many(ids)
    assert lifecycle.retry_many(ids, run_now=run_now) == (3, 0)
    for job, at in ahead:
        job.refresh_from_db()
        assert (job.execute_at <= timezone.now()) if run_now else job.execute_at == at


def test_the_api_keeps_the_time_unless_now(api):
    kept, at = cancelled_ahead()
    response = api.post(f"/api/jobs/{kept.pk}/retry/")
    assert response.status_code == 200, response.content
    assert Job.objects.get(pk=kept.pk).execute_at == at
    forced, _ = cancelled_ahead()
    response = api.post(f"/api/jobs/{forced.pk}/retry/", {"now": True}, format="json")
    assert response.status_code == 200 and Job.objects.get(pk=forced.pk).execute_at <= timezone.now()
    bad = api.post(f"/api/jobs/{forced.pk}/retry/", {"now": "soon", "when": 1}, format="json")
    assert bad.status_code == 400 and set(bad.json()) == {"now", "when"}
    lifecycle.cancel_many([kept.pk, forced.pk])
    response = api.post("/api/jobs/retry/", {"filter": {"status": "cancelled"}, "now": False}, format="json")
    assert response.json() == {"retried": 2}
    assert Job.objects.get(pk=kept.pk).execute_at == at
    lifecycle.cancel_many([kept.pk])
    response = api.post("/api/jobs/retry/", {"filter": {"status": "cancelled"}, "now": True}, format="json")
    assert response.json() == {"retried": 1} and Job.objects.get(pk=kept.pk).execute_at <= timezone.now()


def test_the_admin_keeps_the_time_unless_now(client, superuser):
    client.force_login(superuser)
    admin_client_ = client
    kept, at = cancelled_ahead()
    page = admin_client_.get(f"/admin/scheduler_app/job/{kept.pk}/change/").content.decode()
    assert "Retry at its time" in page and "Retry now" in page
    response = admin_client_.post(f"/admin/scheduler_app/job/{kept.pk}/retry/", follow=True)
    assert "it runs at its time" in response.content.decode()
    assert Job.objects.get(pk=kept.pk).execute_at == at
    lifecycle.cancel(kept.pk)
    admin_client_.post(f"/admin/scheduler_app/job/{kept.pk}/retry/", {"now": "1"})
    assert Job.objects.get(pk=kept.pk).execute_at <= timezone.now()
    other, other_at = cancelled_ahead()
    changelist = "/admin/scheduler_app/job/"
    admin_client_.post(changelist, {"action": "retry_jobs", "_selected_action": [other.pk]})
    assert Job.objects.get(pk=other.pk).execute_at == other_at
    lifecycle.cancel(other.pk)
    admin_client_.post(changelist, {"action": "retry_jobs_now", "_selected_action": [other.pk]})
    assert Job.objects.get(pk=other.pk).execute_at <= timezone.now()


def test_a_view_only_user_gets_no_retry_buttons(client: Client, staff_user):
    from tests.plumbing import grant

    kept, _ = cancelled_ahead()
    grant(staff_user, "view_job")
    client.force_login(staff_user)
    page = client.get(f"/admin/scheduler_app/job/{kept.pk}/change/").content.decode()
    assert "Retry now" not in page
