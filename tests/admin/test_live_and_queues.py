"""The job page's logs and live JSON, the job list's live JSON, the queues page, the one date format."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduler_app.admin.formatting import exact_time, when_html
from scheduler_app.models import Job, JobLog, JobStatus, Queue
from tests.plumbing import grant

pytestmark = pytest.mark.django_db

QUEUES = "/admin/scheduler_app/queue/"


def add_logs(job, attempts=(1, 2)):
    now = timezone.now()
    JobLog.objects.bulk_create(
        JobLog(
            job=job,
            attempt=a,
            seq=i + 1,
            time=now + timedelta(seconds=i),
            level=level,
            logger="app.tasks",
            message=f"attempt {a} <msg {i}>",
            exc_text="Traceback: boom" if level == 40 else "",
        )
        for a in attempts
        for i, level in enumerate((20, 30, 40))
    )
    Job.objects.filter(pk=job.pk).update(logs_count=3 * len(attempts))
    job.refresh_from_db()
    return job


def test_the_one_date_format_names_the_zone_and_hints():
    moment = datetime(2026, 11, 26, 3, 39, 2, tzinfo=UTC)
    assert exact_time(moment) == "2026-11-26 03:39:02 UTC"
    html = str(when_html(moment, moment + timedelta(minutes=2)))
    assert '2026-11-26 03:39:02 UTC</time> <span class="sched-ago">· 2 min ago</span>' in html


def test_job_page_shows_logs_per_attempt_newest_first_with_levels(admin_client_, job_row):
    job = add_logs(job_row(JobStatus.FAILED))
    html = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[job.pk])).content.decode()
    logs = html[html.index('class="sched-logbook"') :]
    assert logs.index("Attempt 2") < logs.index("Attempt 1")
    first = logs[logs.index("Attempt 2") : logs.index("Attempt 1")]
    assert first.index("msg 2") < first.index("msg 1") < first.index("msg 0")  # newest first
    assert "sched-log-error" in first and "sched-log-warning" in first and "sched-log-info" in first
    assert "&lt;msg 0&gt;" in first and "Traceback: boom" in first
    assert 'id="sched-live"' in html and 'data-kind="job-page"' in html
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time> <span class=\"sched-ago\">", html)


def test_job_page_live_json_renders_the_changing_fields(admin_client_, job_row):
    job = job_row(JobStatus.RUNNING, progress={"current": 1, "total": 4, "message": "m"})
    url = reverse("admin:scheduler_app_job_page_live", args=[job.pk])
    data = admin_client_.get(url).json()
    assert data["status"] == "running" and "25%" in data["fields"]["status_badge"]
    assert '<progress max="100" value="25">' in data["fields"]["progress_display"]
    Job.objects.filter(pk=job.pk).update(progress={"current": 3, "total": 4, "message": "m"})
    assert "75%" in admin_client_.get(url).json()["fields"]["status_badge"]
    assert admin_client_.get(reverse("admin:scheduler_app_job_page_live", args=["999999"])).status_code == 404
    assert admin_client_.get("/admin/scheduler_app/job/abc/live/").status_code == 404


def test_job_list_live_json_is_one_query_for_the_page(admin_client_, job_row):
    jobs = [job_row(JobStatus.RUNNING) for _ in range(5)] + [job_row(JobStatus.SUCCEEDED)]
    url = (
        reverse("admin:scheduler_app_job_live")
        + "?ids="
        + ",".join(str(j.pk) for j in jobs)
        + ",x,99999999999999999999"
    )
    admin_client_.get(url)
    with CaptureQueriesContext(connection) as queries:
        data = admin_client_.get(url).json()
    assert len(queries) <= 3  # the session, the user, the rows
    assert set(data["rows"]) == {str(j.pk) for j in jobs}
    assert "Succeeded" in data["rows"][str(jobs[-1].pk)]["status_badge"]
    assert "so far" in data["rows"][str(jobs[0].pk)]["duration_display"]
    listing = admin_client_.get(reverse("admin:scheduler_app_job_changelist")).content.decode()
    assert 'data-kind="job-list"' in listing


def test_job_list_live_json_says_which_rows_the_page_lists_now(admin_client_, job_row):
    old = [job_row(JobStatus.PENDING) for _ in range(3)]
    live = reverse("admin:scheduler_app_job_live")
    shown = ",".join(str(j.pk) for j in old)
    data = admin_client_.get(live, {"ids": shown, "list": "status__exact=pending"}).json()
    assert sorted(data["page"]) == sorted(j.pk for j in old)
    new = job_row(JobStatus.PENDING)  # created while the page is open
    job_row(JobStatus.FAILED)  # not in this filter
    data = admin_client_.get(live, {"ids": shown, "list": "status__exact=pending"}).json()
    assert new.pk in data["page"] and len(data["page"]) == 4
    # In the list's own order, as the page would show it.
    page = admin_client_.get(reverse("admin:scheduler_app_job_changelist"), {"status__exact": "pending"})
    assert data["page"] == [j.pk for j in page.context["cl"].result_list]
    # A query string that no longer reads: no page, and no message left for the next page.
    data = admin_client_.get(live, {"ids": shown, "list": "nonsense__field=1"}).json()
    assert data["page"] is None
    assert admin_client_.get(live, {"ids": shown}).json()["page"] is None  # an old page: cells only


def test_live_views_need_view_job(client, staff_user, job_row):
    job = job_row()
    client.force_login(staff_user)
    assert client.get(reverse("admin:scheduler_app_job_live")).status_code == 403
    assert client.get(reverse("admin:scheduler_app_job_page_live", args=[job.pk])).status_code == 403
    grant(staff_user, "view_job")
    assert client.get(reverse("admin:scheduler_app_job_page_live", args=[job.pk])).status_code == 200


def test_queues_page_lists_load_history_and_pause(admin_client_, job_row):
    now = timezone.now()
    job_row(execute_at=now - timedelta(seconds=20))
    job_row(JobStatus.RUNNING, queue="slow")
    html = admin_client_.get(QUEUES).content.decode()
    assert "<h1>Queues</h1>" in html
    row = html[html.index('data-queue="default"') :]
    row = row[: row.index("</tr>")]
    assert 'data-col="pending">1<' in row and 'data-col="due">1<' in row and ">Pause queue</button>" in row
    assert html.count('class="sched-queue-history"') == 3  # default, other, slow
    data = admin_client_.get(QUEUES + "data/?minutes=1440").json()
    assert set(data["histories"]) == {"default", "other", "slow"} and data["histories"]["slow"]["bucket_seconds"] == 600
    response = admin_client_.post(
        reverse("admin:scheduler_app_queue_toggle", args=["default", "pause"]), {"next": "queues"}
    )
    assert response.status_code == 302 and response["Location"] == QUEUES
    assert Queue.objects.get(name="default").paused
    assert ">Resume queue</button>" in admin_client_.get(QUEUES).content.decode()


def test_queues_page_needs_view_queue_and_pausing_change_queue(client, staff_user):
    client.force_login(staff_user)
    assert client.get(QUEUES).status_code == 403
    assert client.get(QUEUES + "data/").status_code == 403
    grant(staff_user, "view_queue")
    html = client.get(QUEUES).content.decode()
    assert ">Pause queue</button>" not in html
    assert client.post(reverse("admin:scheduler_app_queue_toggle", args=["default", "pause"])).status_code == 403
