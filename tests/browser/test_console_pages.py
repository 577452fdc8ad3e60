"""The pages an operator lives in, at 800, 1280 and 1920 px, with running, failed, waiting, paused and rate-limited work.

Nothing overflows the window; each job is one line from 1280 px on; a failed
job's summary and its Retry / Cancel buttons are on the first screen
(height 800); chart labels are 10 px or more; one 24-hour clock, in the
site's zone (UTC here).
"""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobLog, JobStatus
from tests.browser.test_layout_and_live import OVERFLOW, seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = "tests.testapp.tasks."
WIDTHS = [800, 1280, 1920]

# Each cell's content (not its padding) in lines: 1 when it did not wrap.
CELL_LINES = """(selector) => {
  const out = [];
  for (const td of document.querySelectorAll(selector)) {
    const range = document.createRange();
    range.selectNodeContents(td);
    const height = range.getBoundingClientRect().height;
    const style = getComputedStyle(td);
    const line = style.lineHeight === 'normal' ? parseFloat(style.fontSize) * 1.25 : parseFloat(style.lineHeight);
    if (height > 1.9 * line) out.push(td.className + ': ' + td.textContent.trim().slice(0, 40) + ' (' + Math.round(height) + 'px)');
  }
  return out;
}"""

# The size each chart label is drawn at on screen: its font size times the SVG's scale.
LABEL_SIZES = """() => Array.from(document.querySelectorAll('svg.sched-chart')).flatMap(svg => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return Array.from(svg.querySelectorAll('text')).map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
})"""


def stage():
    """Seed's failed job, finished jobs, schedule and history; then a running job, a paused queue with due
    jobs, a rate-limited queue with more due jobs than its rate, a job waiting on another, jobs due later."""
    failed = seed()
    now = timezone.now()
    running = lifecycle.enqueue(T + "slow_progress", [40, 0.1])[0]
    Job.objects.filter(pk=running.pk).update(
        status=JobStatus.RUNNING,
        attempts=1,
        started_at=now,
        last_attempted_at=now,
        worker="build-7.example.com-4242-a1b2c3",
        lease_expires_at=now + timedelta(minutes=5),
        progress={"current": 12, "total": 40, "message": "", "updated_at": now.isoformat()},
    )
    lifecycle.pause_queue("slow")
    for n in range(3):
        lifecycle.enqueue(T + "add", [n, n], queue="slow", priority=50)
    lifecycle.set_limits("other", rate_limit=1, rate_period=600)
    for n in range(3):
        lifecycle.enqueue(T + "important", [n])
    later = lifecycle.enqueue(T + "add", [1, 1], execute_at=now + timedelta(minutes=20))[0]
    lifecycle.enqueue(T + "add", [2, 2], depends_on=[later.pk])
    return failed


def open_page(browser, live_server, width, scheme="light"):
    context = browser.new_context(
        viewport={"width": width, "height": 800},
        base_url=live_server.url,
        color_scheme=scheme,
        timezone_id="America/New_York",
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return context, page, errors


@pytest.mark.parametrize("width", WIDTHS)
def test_the_console_pages_at(width, browser, live_server, superuser, screenshot_dir):
    failed = stage()
    context, page, errors = open_page(browser, live_server, width)
    problems = {}

    def check(name):
        found = page.evaluate(OVERFLOW)
        if found:
            problems[name] = found
            page.screenshot(path=screenshot_dir / f"overflow-{name}-{width}.png", full_page=True)

    # The job list: nothing clipped; one line per job from 1280 px on; only years that hold jobs.
    page.goto("/admin/scheduler_app/job/")
    check("jobs")
    assert page.locator("#result_list tbody tr").count() >= 15
    if width >= 1280:
        assert page.evaluate(CELL_LINES, "#result_list tbody td, #result_list tbody th") == []
        heights = page.eval_on_selector_all(
            "#result_list tbody tr", "rows => rows.map(r => r.getBoundingClientRect().height)"
        )
        assert max(heights) < 1.5 * min(heights), heights
        # The filters are beside the list.
        table, filters = page.locator("#result_list").bounding_box(), page.locator("#changelist-filter").bounding_box()
        page.screenshot(path=screenshot_dir / f"console-jobs-{width}.png")  # kept: the list as the test saw it
        assert filters["x"] >= table["x"] + table["width"] and filters["y"] < table["y"] + table["height"], (
            table,
            filters,
        )
    assert (
        page.locator("#result_list .sched-task-short[title='tests.testapp.tasks.slow_progress']").inner_text()
        == "slow_progress"
    )
    assert page.locator("#result_list .sched-worker-id").first.inner_text() == "build-7-4242"
    years = {int(y) for y in re.findall(r"execute_at__year=(\d+)", page.content())}
    assert years == {timezone.localdate().year} or years <= {timezone.localdate().year, timezone.localdate().year + 1}

    # A failed job's page: its summary and buttons on the first screen.
    page.goto(f"/admin/scheduler_app/job/{failed.pk}/change/")
    check("failed-job")
    summary = page.locator("#sched-summary")
    assert (
        "Failed" in summary.inner_text()
        and "ValueError" in summary.inner_text()
        and "chatty failed" in summary.inner_text()
    )
    for box in (
        summary.bounding_box(),
        page.locator("#sched-summary .sched-action-retry").bounding_box(),
        page.locator("#sched-summary .sched-action-cancel").bounding_box(),
    ):
        assert box["y"] + box["height"] <= 800 and box["x"] + box["width"] <= width, box
    assert page.locator("#sched-summary .sched-action-retry").is_enabled()
    assert page.locator("#sched-summary .sched-action-cancel").is_disabled()
    assert page.locator(".sched-error[open]").count() == 1 and page.locator(".sched-error").count() == 2
    assert page.locator(".field-cancel_requested_display").count() == 0 and page.locator("img[alt=False]").count() == 0

    # The running job's page and the add form fit too.
    running = Job.objects.get(status=JobStatus.RUNNING)
    page.goto(f"/admin/scheduler_app/job/{running.pk}/change/")
    check("running-job")
    assert page.locator("#sched-summary .sched-action-cancel").is_enabled()
    page.goto("/admin/scheduler_app/job/add/")
    check("add-job")
    assert "In UTC (the site's time zone)." in page.locator(".field-execute_at").inner_text()

    # The dashboard: labels of 10 px or more, one clock (24-hour, UTC), upcoming without the paused queue's jobs.
    page.goto("/admin/scheduler_app/dashboard/")
    page.wait_for_selector("svg.sched-chart")
    check("dashboard")
    sizes = page.evaluate(LABEL_SIZES)
    assert sizes and min(sizes) >= 10, sorted(sizes)[:5]
    axis = page.eval_on_selector_all("svg.sched-chart text.label", "ts => ts.map(t => t.textContent)")
    times = [t for t in axis if ":" in t]
    assert times and all(re.fullmatch(r"\d\d:\d\d", t) for t in times), times
    assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", page.locator("#sched-live .sched-live-updated").inner_text())
    assert page.locator("text=updated –").count() == 0
    upcoming = page.locator('[data-section="upcoming"]').inner_text()
    assert "Not listed, paused: 3 pending in slow" in upcoming and "\tslow\t" not in upcoming
    assert (
        page.evaluate(
            CELL_LINES,
            ".sched-flow th[scope=row]:not(:has(.sched-schedule-run)), .sched-flow td:has(.sched-task-short)",
        )
        == []
    )
    assert "4 slots shared by default, other, slow" in page.locator('[data-section="workers"]').inner_text()
    if width >= 1920:  # the width is used: the tables take two columns
        lefts = page.eval_on_selector_all(
            ".sched-flow > .sched-panel", "ps => ps.map(p => Math.round(p.getBoundingClientRect().left))"
        )
        assert len(set(lefts)) >= 2, lefts

    # The queues page: the dashboard's words.
    page.goto("/admin/scheduler_app/queue/")
    page.wait_for_selector("svg.sched-chart")
    check("queues")
    head = page.locator(".sched-queues thead").text_content()
    assert all(word in head for word in ("Pending", "Due now", "Oldest due lag")) and "Depth" not in head
    assert min(page.evaluate(LABEL_SIZES)) >= 10

    page.screenshot(path=screenshot_dir / f"console-queues-{width}.png")
    context.close()
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())
    assert errors == []


def test_empty_charts_say_no_data(browser, live_server, superuser):
    context, page, errors = open_page(browser, live_server, 1280)
    page.goto("/admin/scheduler_app/dashboard/")
    page.wait_for_selector("svg.sched-chart")
    assert page.locator("svg.sched-chart .sched-no-data").count() == 5
    assert page.locator("svg.sched-chart .sched-no-data").first.text_content() == "no data"
    context.close()
    assert errors == []


def test_the_live_refresh_keeps_what_the_reader_opened_or_closed(browser, live_server, superuser):
    failed = stage()
    context, page, errors = open_page(browser, live_server, 1280)
    page.goto(f"/admin/scheduler_app/job/{failed.pk}/change/")
    page.select_option(".sched-live-interval", "2000")
    newest, oldest = page.locator('.sched-error[data-key="error-1"]'), page.locator('.sched-error[data-key="error-0"]')
    assert newest.get_attribute("open") is not None and oldest.get_attribute("open") is None
    newest.locator("summary").click()  # closed by the reader
    oldest.locator("summary").click()  # opened by the reader
    logs = page.locator('.sched-logs-attempt[data-key="logs-1"]')
    logs.locator("summary").click()  # opened by the reader (the newest attempt's, 2, is open)
    # The errors and the logs change on the server: both fields are swapped on the next refresh.
    job = Job.objects.get(pk=failed.pk)
    Job.objects.filter(pk=job.pk).update(
        errors=[*job.errors, {**job.errors[-1], "attempt": 3, "message": "a third time"}]
    )
    JobLog.objects.create(
        job_id=job.pk, attempt=2, seq=99, time=timezone.now(), level=20, logger="tests", message="one more line"
    )
    page.wait_for_function("() => document.querySelector('.field-errors_display').textContent.includes('a third time')")
    page.wait_for_function("() => document.querySelector('.field-logs_display').textContent.includes('one more line')")
    assert newest.get_attribute("open") is None and oldest.get_attribute("open") is not None
    assert (
        page.locator('.sched-error[data-key="error-2"]').get_attribute("open") is not None
    )  # new: the server's default
    assert logs.get_attribute("open") is not None
    # ... and on the refreshes after it.
    refreshes = int(page.locator("#sched-live").get_attribute("data-refreshes"))
    page.wait_for_function(
        "n => parseInt(document.querySelector('#sched-live').dataset.refreshes) >= n + 2", arg=refreshes
    )
    assert newest.get_attribute("open") is None and oldest.get_attribute("open") is not None
    context.close()
    assert errors == []


def test_retry_from_the_failed_jobs_summary(browser, live_server, superuser):
    failed = stage()
    context, page, errors = open_page(browser, live_server, 1280)
    page.goto(f"/admin/scheduler_app/job/{failed.pk}/change/")
    page.click("#sched-summary .sched-action-retry")
    page.wait_for_selector(".messagelist .success")
    assert f"Job {failed.pk} is pending again" in page.locator(".messagelist").inner_text()
    assert Job.objects.get(pk=failed.pk).status == JobStatus.PENDING
    assert "Pending" in page.locator("#sched-summary .sched-badge").first.inner_text()
    context.close()
    assert errors == []
