"""A job's page leads with its summary: status, last error, attempts, and Retry / Cancel (POSTs with CSRF, change_job)."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from scheduler_app.models import Job, JobStatus
from tests.plumbing import grant

pytestmark = pytest.mark.django_db

ERRORS = [
    {
        "attempt": 1,
        "time": "2026-11-26T03:39:02+00:00",
        "worker": "w1",
        "exception_class": "builtins.ValueError",
        "message": "first",
        "traceback": "Traceback one",
    },
    {
        "attempt": 2,
        "time": "2026-11-26T03:40:02+00:00",
        "worker": "w2",
        "exception_class": "billing.errors.ProviderDown",
        "message": "the payment provider answered 503",
        "traceback": "Traceback two",
    },
]


def page(client, job):
    return client.get(reverse("admin:scheduler_app_job_change", args=[job.pk])).content.decode()


def summary_of(html):
    return html.split('id="sched-summary"')[1].split("</section>")[0]


def action_url(job, action):
    return reverse(f"admin:scheduler_app_job_{action}", args=[job.pk])


def test_a_failed_jobs_page_leads_with_its_last_error_attempts_and_buttons(admin_client_, job_row):
    job = job_row(JobStatus.FAILED, attempts=2, max_attempts=2, errors=ERRORS)
    html = page(admin_client_, job)
    summary = summary_of(html)
    assert "Failed" in summary and "attempts 2/2" in summary
    assert (
        '<code title="billing.errors.ProviderDown">ProviderDown</code>: <span class="sched-summary-message">the payment provider answered 503</span>'
        in summary
    )
    assert "Last error (attempt 2)" in summary
    assert f'action="{action_url(job, "retry")}"' in summary and f'action="{action_url(job, "cancel")}"' in summary
    retry, cancel = (
        summary.split('class="button sched-action-retry')[1],
        summary.split('class="button sched-action-cancel')[1],
    )
    assert " disabled" not in retry.split(">")[0] and " disabled" in cancel.split(">")[0]
    assert "csrfmiddlewaretoken" in summary
    # The summary comes before the form; the errors, newest first (open), before the other fieldsets.
    assert html.index('id="sched-summary"') < html.index('id="job_form"')
    assert html.index("Attempt 2") < html.index("Attempt 1") < html.index(">Execution<")
    assert (
        '<details class="sched-error" data-key="error-1" open>' in html
        and '<details class="sched-error" data-key="error-0">' in html
    )
    # "Cancel requested" is not a red cross for "no": it is not shown at all.
    assert "icon-no" not in html and "Cancel requested" not in html


def test_a_running_job_asked_to_stop_says_so_plainly(admin_client_, job_row):
    job = job_row(JobStatus.RUNNING, cancel_requested=True)
    html = page(admin_client_, job)
    assert "Cancel requested: the task was asked to stop at its next check." in summary_of(html)
    assert "Yes: the task was asked to stop at its next check." in html
    assert "icon-yes" not in html and "icon-no" not in html
    # No error yet: its logs lead, the empty errors come later.
    assert html.index(">Logs</h2>") < html.index(">Execution</h2>") < html.index(">Errors</h2>")


def test_retry_posts_through_the_lifecycle(admin_client_, job_row):
    job = job_row(JobStatus.FAILED, attempts=2, max_attempts=2, errors=ERRORS)
    response = admin_client_.post(action_url(job, "retry"))
    assert response.status_code == 302 and response.url == reverse("admin:scheduler_app_job_change", args=[job.pk])
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and job.max_attempts == 3 and len(job.errors) == 2
    assert [str(m) for m in get_messages(response.wsgi_request)] == [f"Job {job.pk} is pending again: it runs now."]
    # Again: the lifecycle refuses, and the page says so.
    response = admin_client_.post(action_url(job, "retry"))
    assert [str(m) for m in get_messages(response.wsgi_request)][-1:] == [
        f"Not done: Only failed or cancelled jobs can be retried; job {job.pk} is pending."
    ]


def test_cancel_posts_through_the_lifecycle(admin_client_, job_row):
    pending, running = job_row(), job_row(JobStatus.RUNNING)
    admin_client_.post(action_url(pending, "cancel"))
    admin_client_.post(action_url(running, "cancel"))
    assert Job.objects.get(pk=pending.pk).status == JobStatus.CANCELLED
    running = Job.objects.get(pk=running.pk)
    assert running.status == JobStatus.RUNNING and running.cancel_requested


def test_the_buttons_need_change_job_a_post_and_csrf(client, staff_user, job_row):
    job = job_row(JobStatus.FAILED, errors=ERRORS)
    grant(staff_user, "view_job")
    client.force_login(staff_user)
    assert client.post(action_url(job, "retry")).status_code == 403
    assert "sched-action-retry" not in summary_of(page(client, job))  # no buttons without change_job
    grant(staff_user, "change_job")
    staff_user = type(staff_user).objects.get(pk=staff_user.pk)
    client.force_login(staff_user)
    assert client.get(action_url(job, "retry")).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(staff_user)
    assert strict.post(action_url(job, "retry")).status_code == 403
    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED
    assert client.post(action_url(job, "retry")).status_code == 302
    assert Job.objects.get(pk=job.pk).status == JobStatus.PENDING


def test_unknown_ids_are_not_found(admin_client_):
    for object_id in ("999999", "x", "99999999999999999999999"):
        assert admin_client_.post(f"/admin/scheduler_app/job/{object_id}/retry/").status_code == 404


def test_the_live_json_carries_the_summary(admin_client_, job_row):
    job = job_row(JobStatus.FAILED, errors=ERRORS)
    data = admin_client_.get(reverse("admin:scheduler_app_job_page_live", args=[job.pk])).json()
    assert "ProviderDown" in data["summary"] and "sched-action-retry" in data["summary"]
