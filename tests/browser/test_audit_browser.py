"""The audit page, a job's History and a job with filtered arguments in a real browser, at 800, 1280 and 1920 px.

Nothing overflows; the secret is nowhere on the page, "[FILTERED]" is.
Screenshots go to the test artifacts (``audit-<width>.png``,
``job-filtered-<width>.png``, ``job-history-<width>.png``); docs/img/ holds
copies of the 1280 px ones for docs/ADMIN.md.
"""

import pytest
from django.contrib.auth import get_user_model

from scheduler_app import lifecycle, schedules
from scheduler_app.models import JobStatus
from tests.browser.test_console_pages import open_page
from tests.browser.test_layout_and_live import OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = "tests.testapp.tasks."
SECRET = "hunter2-s3cr3t"
KWARGS = {
    "account": "acme-eu-west",
    "password": SECRET,
    "connection": {"host": "db.internal.example.com", "API_KEY": "key-0451", "retries": 3},
    "notify": ["ops@example.com", "billing@example.com"],
}


def stage(superuser):
    """A job with secrets, and an audit trail: admin, API and command events on jobs, queues, schedules."""
    alice = get_user_model().objects.create_user("alice.operator", is_staff=True)
    job, _ = lifecycle.enqueue(T + "echo_kwargs", [], KWARGS, priority=5)
    audit = lifecycle.audit.record
    audit("create", via="api", user=alice, object_type="job", object_id=job.pk, detail={"kwargs": KWARGS})
    audit("reschedule", via="admin", user=superuser, object_type="job", object_id=job.pk, detail={"priority": 5})
    others = [lifecycle.enqueue(T + "add", [n, n], queue="slow")[0] for n in range(3)]
    lifecycle.cancel_many([j.pk for j in others])
    audit(
        "bulk_cancel",
        via="admin",
        user=superuser,
        object_type="job",
        filter={"queue": "slow", "status__exact": "pending", "q": "add"},
        count=3,
        detail={"cancel_requested": 0},
    )
    lifecycle.pause_queue("slow")
    audit("pause", via="admin", user=superuser, object_type="queue", object_id="slow")
    schedule = schedules.create(name="nightly-report", task=T + "add", args=[1, 2], cron="0 2 * * *")
    audit("disable", via="api", user=alice, object_type="schedule", object_id=schedule.pk)
    audit(
        "prune",
        via="command",
        user="deploy",
        object_type="job",
        filter={"succeeded_older_than": 1209600.0, "failed_older_than": 2592000.0},
        count=1250,
    )
    assert job.status == JobStatus.PENDING
    return job


@pytest.mark.parametrize("width", [800, 1280, 1920])
def test_the_audit_page_and_a_filtered_job_at(width, browser, live_server, superuser, screenshot_dir):
    job = stage(superuser)
    context, page, errors = open_page(browser, live_server, width)
    problems = {}

    def look(name, url):
        page.goto(url)
        found = page.evaluate(OVERFLOW)
        if found:
            problems[name] = found
        text = page.content()
        assert SECRET not in text and "key-0451" not in text, name
        # A job's page is long: its first 1,050 px (the summary down to the kwargs) make the picture.
        clip = {"x": 0, "y": 0, "width": width, "height": 1050} if name == "job-filtered" else None
        page.screenshot(path=screenshot_dir / f"{name}-{width}.png", full_page=True, clip=clip)
        return text

    text = look("audit", "/admin/scheduler_app/auditevent/")
    assert page.locator("#result_list tbody tr").count() == 6
    assert "bulk_cancel" in text and "alice.operator" in text and "[FILTERED]" in text
    assert page.locator("#changelist-filter").count() == 1
    text = look("job-filtered", f"/admin/scheduler_app/job/{job.pk}/change/")
    assert "[FILTERED]" in text and "acme-eu-west" in text
    text = look("job-history", f"/admin/scheduler_app/job/{job.pk}/history/")
    assert "Audit trail" in text and "reschedule" in text
    page.goto(f"/admin/scheduler_app/auditevent/?object_type=job&object_id={job.pk}")
    assert page.locator("#result_list tbody tr").count() == 2
    context.close()
    assert problems == {}
    assert errors == []
