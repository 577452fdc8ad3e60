"""The admin console in real headless Chromium: log in, schedule, run, cancel, watch."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobStatus, Queue

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ADD = "tests.testapp.tasks.add"


def expect():
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def seed_history(now=None):
    """Finished jobs over the last hour, so the chart has bars (test setup rows)."""
    now = now or timezone.now()
    rows = []
    for minute in range(0, 60, 3):
        for n in range(minute % 7 + 1):
            status = JobStatus.FAILED if n == 0 and minute % 9 == 0 else JobStatus.SUCCEEDED
            at = now - timedelta(minutes=minute, seconds=n)
            rows.append(
                Job(
                    task=ADD,
                    args=[n, minute],
                    status=status,
                    attempts=1,
                    started_at=at - timedelta(milliseconds=300),
                    finished_at=at,
                    errors=[
                        {
                            "attempt": 1,
                            "exception_class": "builtins.ValueError",
                            "message": f"bad input {minute}",
                            "traceback": "Traceback ...",
                        }
                    ]
                    if status == JobStatus.FAILED
                    else [],
                    result=n + minute if status == JobStatus.SUCCEEDED else None,
                )
            )
    Job.objects.bulk_create(rows)
    # ... and the rollups the dispatchers that ran them would have written (the charts read these).
    from scheduler_app.observability import rollups
    from scheduler_app.vocabulary.tallies import Tally

    tallies = {}
    for minute in range(0, 60, 3):
        at = (now - timedelta(minutes=minute)).replace(second=0, microsecond=0)
        tally = Tally(
            started=minute % 7 + 1,
            succeeded=minute % 7 + (0 if minute % 9 == 0 else 1),
            failed=1 if minute % 9 == 0 else 0,
        )
        tally.run.add(0.3)
        tallies[(at.timestamp(), "default", ADD)] = tally
    rollups.record(tallies, now)


def test_the_add_form_shows_the_tasks_signature_and_options(logged_in):
    page = logged_in
    page.goto(page.url.split("/admin/")[0] + "/admin/scheduler_app/job/add/")
    page.select_option("#id_task", "tests.testapp.tasks.with_options")
    info = page.locator("#sched-task-info")
    expect()(info).to_contain_text("with_options(x)")
    expect()(info).to_contain_text("@options(max_attempts=5, timeout=30, backoff=0, unique=true)")
    assert page.get_attribute("#id_max_attempts", "placeholder") == "task: 5"
    assert page.get_attribute("#id_timeout", "placeholder") == "task: 30 s"
    page.select_option("#id_task", ADD)
    expect()(info).to_contain_text("add(a, b)")
    assert page.get_attribute("#id_max_attempts", "placeholder") == ""


def test_create_job_in_the_add_form_and_see_it_run(logged_in, screenshot_dir, run_dispatcher_burst):
    page = logged_in
    page.click("tr.model-job a.addlink")  # "Add" next to Jobs on the admin index
    page.wait_for_url("**/admin/scheduler_app/job/add/")
    # The task is a select of registered tasks; its docstring shows on choice.
    assert page.locator("select#id_task").count() == 1
    page.select_option("#id_task", ADD)
    page.fill("#id_args", "[2, 3")
    page.click("input[name=_save]")
    expect()(page.locator(".errornote")).to_be_visible()
    expect()(page.locator(".field-args .errorlist")).to_contain_text("Not valid JSON")
    page.screenshot(path=screenshot_dir / "01-add-form-inline-error.png", full_page=True)
    assert Job.objects.count() == 0

    page.fill("#id_args", "[2, 3]")
    page.click("input[name=_continue]")
    page.wait_for_url("**/admin/scheduler_app/job/*/change/")
    job = Job.objects.get()
    assert (job.task, job.args, job.status) == (ADD, [2, 3], JobStatus.PENDING)
    expect()(page.locator(".messagelist")).to_contain_text("was added successfully")
    expect()(page.locator(".field-status_badge .sched-badge")).to_have_text("Pending")
    page.screenshot(path=screenshot_dir / "02-job-pending.png", full_page=True)

    result = run_dispatcher_burst()
    assert result.returncode == 0, result.stdout + result.stderr
    page.reload()
    expect()(page.locator(".field-status_badge .sched-badge")).to_have_text("Succeeded")
    expect()(page.locator(".field-result_display pre")).to_have_text("5")
    expect()(page.locator(".field-attempts_display .readonly")).to_have_text("1/3")
    page.screenshot(path=screenshot_dir / "03-job-succeeded.png", full_page=True)
    job.refresh_from_db()
    assert (job.status, job.result) == (JobStatus.SUCCEEDED, 5)


def test_cancel_a_pending_job_with_the_action(logged_in, screenshot_dir):
    page = logged_in
    seed_history()  # older rows, so the new ones head the list
    later = timezone.now() + timedelta(minutes=30)
    keep, _ = lifecycle.enqueue(ADD, [1, 1], execute_at=later)
    victim, _ = lifecycle.enqueue(ADD, [2, 2], execute_at=later)
    page.goto("/admin/scheduler_app/job/?status__exact=pending")
    expect()(page.locator("#result_list tbody tr")).to_have_count(2)
    expect()(page.locator("#result_list")).to_contain_text("in 29 min")
    page.check(f"input.action-select[value='{victim.pk}']")
    page.select_option("select[name=action]", "cancel_jobs")
    page.click("button[name=index]")
    expect()(page.locator(".messagelist")).to_contain_text("Cancelled 1 pending job.")
    victim.refresh_from_db()
    keep.refresh_from_db()
    assert (victim.status, keep.status) == (JobStatus.CANCELLED, JobStatus.PENDING)

    page.goto("/admin/scheduler_app/job/")
    row = page.locator(f"#result_list tr:has(a[href$='/{victim.pk}/change/'])")
    badge = row.locator(".sched-badge")
    expect()(badge).to_have_text("Cancelled")
    # Badges are readable: white text on a coloured pill.
    colours = badge.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
    assert colours == ["rgb(255, 255, 255)", "rgb(97, 97, 97)"]
    failed = page.locator(".sched-badge.sched-failed").first
    assert failed.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(198, 40, 40)"
    page.screenshot(path=screenshot_dir / "04-job-list-after-cancel.png", full_page=False)


def test_dashboard_refreshes_in_place(logged_in, screenshot_dir, monkeypatch):
    # The page refreshes every REFRESH_SECONDS (3 s); what is tested is that
    # it does, in place, not how often.
    monkeypatch.setattr("scheduler_app.admin.dashboard.REFRESH_SECONDS", 0.5)
    page = logged_in
    seed_history()
    lifecycle.enqueue(ADD, [1, 2], execute_at=timezone.now() + timedelta(minutes=10))
    page.click("a[href='/admin/scheduler_app/dashboard/']")
    page.wait_for_url("**/admin/scheduler_app/dashboard/")
    expect()(page.locator("#sched-count-pending")).to_have_text("1")
    assert page.locator("[data-chart=throughput] svg.sched-chart rect.c-ok").count() > 10
    assert page.locator("[data-chart=throughput] svg.sched-chart rect.c-fail").count() >= 1
    page.click(".sched-range[data-minutes='1440']")  # 24 h: ten-minute buckets, added up to bars of 6 px or more
    page.wait_for_function("() => document.querySelector('#sched-dashboard').dataset.minutes === '1440'")
    # 57 minutes of rows fall into 2 to 7 bars, depending on the clock and the chart's width.
    page.wait_for_function(
        "() => document.querySelectorAll('[data-chart=throughput] svg.sched-chart rect.c-ok').length <= 7"
    )
    assert page.locator("[data-chart=throughput] svg.sched-chart rect.c-ok").count() >= 2
    widths = page.eval_on_selector_all(
        "[data-chart=throughput] svg.sched-chart rect.c-ok", "rs => rs.map(r => r.getBoundingClientRect().width)"
    )
    assert min(widths) >= 4, widths  # not the 1-2 px bars of 144 buckets in a 300 px chart
    page.click(".sched-range[data-minutes='60']")
    page.screenshot(path=screenshot_dir / "05-dashboard.png", full_page=True)

    # Mark this page load and scroll down: a reload would lose both.
    page.evaluate("window.__sameLoad = true")
    page.mouse.wheel(0, 400)
    page.wait_for_function("window.scrollY > 0")
    scroll = page.evaluate("window.scrollY")
    refreshes = int(page.locator("#sched-dashboard").get_attribute("data-refreshes") or 0)

    for n in range(3):
        lifecycle.enqueue(ADD, [n, n])  # due now
    Job.objects.create(
        task=ADD, status=JobStatus.RUNNING, attempts=1, started_at=timezone.now() - timedelta(seconds=5), worker="w"
    )
    # A loaded machine makes the server slow and the page slows down with it
    # (ten times the last request's time, at most 30 s between refreshes).
    expect()(page.locator("#sched-count-pending")).to_have_text("4", timeout=35_000)
    expect()(page.locator("#sched-count-running")).to_have_text("1")
    expect()(page.locator("#sched-due-now")).to_have_text("3")
    expect()(page.locator("[data-section=running] .sched-task-short[title='tests.testapp.tasks.add']")).to_have_text(
        "add"
    )
    assert page.evaluate("window.__sameLoad") is True
    # Not back at the top (no reload). Where a section above the reader grew (a
    # "late" reason appeared), the browser's scroll anchoring moved by as much.
    assert scroll <= page.evaluate("window.scrollY") <= scroll + 200
    assert int(page.locator("#sched-dashboard").get_attribute("data-refreshes")) > refreshes

    # Pause a queue from the dashboard: posted with fetch, no reload either.
    row = page.locator("tr[data-queue=default]")
    row.locator("button.sched-toggle").click()
    expect()(row.locator("button.sched-toggle")).to_have_text("Resume queue")
    expect()(row.locator(".sched-paused-badge")).to_be_visible()
    expect()(page.locator("#sched-notice .success")).to_contain_text("Queue “default” paused")  # it says so
    assert Queue.objects.get(name="default").paused
    assert page.evaluate("window.__sameLoad") is True
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=screenshot_dir / "06-dashboard-live-paused.png", full_page=True)
    row.locator("button.sched-toggle").click()
    expect()(row.locator("button.sched-toggle")).to_have_text("Pause queue")
    assert not Queue.objects.get(name="default").paused


def test_dashboard_json_is_staff_only(page, live_server, plain_user):
    response = page.request.get("/admin/scheduler_app/dashboard/data/", max_redirects=0)
    assert response.status == 302 and "/admin/login/" in response.headers["location"]
    page.goto("/admin/login/?next=/admin/scheduler_app/dashboard/")
    page.fill("#id_username", "plain")
    page.fill("#id_password", "pw-plain-123")
    page.click("input[type=submit]")
    expect()(page.locator(".errornote")).to_be_visible()  # not staff: no way in
    response = page.request.get("/admin/scheduler_app/dashboard/data/", max_redirects=0)
    assert response.status == 302 and "/admin/login/" in response.headers["location"]
