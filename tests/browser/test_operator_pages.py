"""Search that finds and pages that stay live (issue 38, sections 3 and 4), at 800, 1280 and 1920 px.

On screen: a running job, a failed one, a waiting one, a paused queue's
jobs (test_console_pages.stage), tagged jobs of customer cust-5, a
workflow, dispatchers. Screenshots: ``ops-<page>-<width>.png`` in the test
artifacts; nothing may be clipped (OVERFLOW).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobStatus, Worker
from tests.browser.test_console_pages import WIDTHS, open_page, stage
from tests.browser.test_layout_and_live import OVERFLOW
from tests.browser.test_workflow_browser import invoices_workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = "tests.testapp.tasks."


def customers():
    """Eleven jobs that name cust-5 somewhere (arguments, a tag, an error), and others that do not."""
    found = []
    for n in range(8):
        found.append(
            lifecycle.enqueue(T + "add", [n, 5], tags=["billing", f"batch-{n}"], meta={"customer": "cust-5"})[0]
        )
    found.append(lifecycle.enqueue(T + "add", [1, 1], tags=["cust-5"])[0])
    job = lifecycle.enqueue(T + "add", [2, 2], tags=["billing", "eu-west", "priority", "nightly"])[0]
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.FAILED,
        attempts=1,
        started_at=now,
        finished_at=now,
        errors=[{"attempt": 1, "exception_class": "builtins.KeyError", "message": "'cust-5'", "traceback": "t"}],
    )
    found.append(job)
    found.append(lifecycle.enqueue(T + "add", [3, 3], unique_key="invoice-cust-5-2026")[0])
    lifecycle.enqueue(T + "add", [4, 4], tags=["cust-6"], meta={"customer": "cust-6"})
    return found


def dispatchers():
    now = timezone.now()
    Worker.objects.create(
        id="build-7.example.com-4242-a1b2c3",
        hostname="build-7.example.com",
        pid=4242,
        queues=["default", "other", "slow"],
        slots={"*": 4},
        last_heartbeat=now,
        started_at=now - timedelta(hours=2),
        processed=120,
    )


def check_page(page, width, screenshot_dir, problems, name):
    """Screenshot the page as ``ops-<name>-<width>.png`` and record what it clips (OVERFLOW)."""
    found = page.evaluate(OVERFLOW)
    if found:
        problems[name] = found
    page.screenshot(path=screenshot_dir / f"ops-{name}-{width}.png", full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_search_tags_and_the_live_pages_fit_at(width, browser, live_server, superuser, screenshot_dir):
    """At each width: the admin's search finds what the API's finds, tags are on screen, nothing is clipped."""
    stage()
    cust = customers()
    workflow, _ = invoices_workflow()
    dispatchers()
    context, page, errors = open_page(browser, live_server, width)
    problems = {}

    # Section 3: the admin's search finds what the API's finds; tags are on screen.
    page.goto("/admin/scheduler_app/job/?q=cust-5")
    shown = {
        int(v) for v in page.eval_on_selector_all("#result_list input.action-select", "bs => bs.map(b => b.value)")
    }
    assert shown == {j.pk for j in cust}
    api = page.evaluate("() => fetch('/api/jobs/?search=cust-5&page_size=100').then(r => r.json())")
    assert {j["id"] for j in api["results"]} == shown
    tags = page.locator("#result_list .field-task_name .job-tag")
    assert tags.count() >= 10 and all(tags.nth(i).is_visible() for i in range(tags.count()))
    assert "+2" in page.locator(f'#result_list tr:has(input[value="{cust[9].pk}"]) .field-task_name').inner_text()
    check_page(page, width, screenshot_dir, problems, "search")

    # The live pages, as they first show (test_pages_refresh_themselves watches them change).
    for name, url in [
        ("jobs-live", "/admin/scheduler_app/job/"),
        ("workers", "/admin/scheduler_app/worker/"),
        ("workflow", f"/admin/scheduler_app/workflow/{workflow.pk}/change/"),
    ]:
        page.goto(url)
        page.wait_for_selector("#sched-live:not([hidden])")
        check_page(page, width, screenshot_dir, problems, name)

    # Per-task run times (p50, p95 over time), and the 1-hour chart's bars are wider than 2 px.
    page.goto("/admin/scheduler_app/dashboard/runtimes/?minutes=10080")
    page.wait_for_selector("#sched-runtimes svg.sched-chart")
    assert page.locator("#sched-runtimes svg.sched-chart path.line.c-p50").count() >= 1
    assert page.locator("#sched-runtimes svg.sched-chart path.line.c-p95").count() >= 1
    check_page(page, width, screenshot_dir, problems, "runtimes")
    page.goto("/admin/scheduler_app/dashboard/")
    page.wait_for_selector('[data-chart="throughput"] svg.sched-chart')
    widths = page.eval_on_selector_all(
        '[data-chart="throughput"] svg.sched-chart rect.c-ok', "rs => rs.map(r => r.getBoundingClientRect().width)"
    )
    assert widths and min(widths) > 2, widths
    check_page(page, width, screenshot_dir, problems, "dashboard")

    context.close()
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())
    assert errors == []


def test_pages_refresh_themselves(browser, live_server, superuser, screenshot_dir):
    """Section 4: a new job appears in the open list, the workers page and a workflow's graph follow the database.

    Whether a page refreshes does not depend on its width: one width (1280) is watched.
    """
    stage()
    workflow, wf_jobs = invoices_workflow()
    dispatchers()
    context, page, errors = open_page(browser, live_server, 1280)

    # A job created while the list is open appears by itself.
    page.goto("/admin/scheduler_app/job/")
    page.select_option(".sched-live-interval", "2000")
    page.evaluate("window.__sameLoad = true")
    new = lifecycle.enqueue(T + "add", [7, 7], tags=["just-made"])[0]
    page.wait_for_selector(f'#result_list input.action-select[value="{new.pk}"]', timeout=15_000)
    assert page.evaluate("window.__sameLoad") is True  # no reload: the rows came by themselves
    assert page.locator(f'#result_list tr:has(input[value="{new.pk}"]) .job-tag').inner_text() == "just-made"
    # The actions still work on the new rows: select it, the counter says so.
    page.check(f'#result_list input.action-select[value="{new.pk}"]')
    assert page.locator(".action-counter").inner_text().startswith("1 of")

    # The workers page is live.
    page.goto("/admin/scheduler_app/worker/")
    page.select_option(".sched-live-interval", "2000")
    assert "120" in page.locator("#result_list").inner_text()
    Worker.objects.filter(processed=120).update(processed=121, last_heartbeat=timezone.now())
    page.wait_for_function("() => document.querySelector('#result_list').innerText.includes('121')", timeout=15_000)

    # A workflow's graph is live.
    page.goto(f"/admin/scheduler_app/workflow/{workflow.pk}/change/")
    page.select_option(".sched-live-interval", "2000")
    pending = next(j for j in wf_jobs if j.status == JobStatus.PENDING)
    node = f'#sched-workflow [data-job="{pending.pk}"]'
    assert "sched-node-pending" in (page.locator(node).get_attribute("class") or "")
    Job.objects.filter(pk=pending.pk).update(status=JobStatus.RUNNING, attempts=1, started_at=timezone.now())
    page.wait_for_function(
        "s => (document.querySelector(s).getAttribute('class') || '').includes('sched-node-running')",
        arg=node,
        timeout=15_000,
    )
    context.close()
    assert errors == []


@pytest.mark.parametrize("width", [800, 1280])
def test_the_add_form_offers_times_and_shows_them_in_the_browsers_zone(
    width, browser, live_server, superuser, screenshot_dir
):
    context, page, errors = open_page(browser, live_server, width)  # the browser in America/New_York, the site in UTC
    page.goto("/admin/scheduler_app/job/add/")
    page.click("text=Tomorrow 09:00")
    # 09:00 in New York in December is 14:00 UTC: the boxes are in the site's zone.
    assert page.input_value("#id_execute_at_1") == "14:00:00"
    assert "09:00" in page.locator(".sched-when-local").inner_text()
    assert "America/New_York" in page.locator(".sched-when-local").inner_text()
    page.click("text=In 1 hour")
    date, time = page.input_value("#id_execute_at_0"), page.input_value("#id_execute_at_1")
    at = timezone.datetime.fromisoformat(f"{date}T{time}+00:00")
    assert abs((at - timezone.now()).total_seconds() - 3600) < 120
    page.select_option("#id_task", "tests.testapp.tasks.add")
    page.fill("#id_args", "[1, 2]")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    job = Job.objects.latest("pk")
    assert abs((job.execute_at - at).total_seconds()) < 1
    found = page.evaluate(OVERFLOW)
    page.goto("/admin/scheduler_app/job/add/")
    page.screenshot(path=screenshot_dir / f"ops-add-job-{width}.png", full_page=True)
    found += page.evaluate(OVERFLOW)
    context.close()
    assert found == [] and errors == []


def a_chatty_running_job():
    """A running second attempt with 120 log records and the first attempt's error."""
    from scheduler_app.models import JobLog

    now = timezone.now()
    job = lifecycle.enqueue(T + "slow_progress", [40, 0.1], tags=["billing", "nightly"], meta={"customer": "cust-5"})[0]
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        attempts=2,
        started_at=now - timedelta(minutes=3),
        last_attempted_at=now - timedelta(seconds=40),
        worker="build-7.example.com-4242-a1b2c3",
        lease_expires_at=now + timedelta(minutes=5),
        progress={"current": 12, "total": 40, "message": "rendering page 12", "updated_at": now.isoformat()},
        errors=[
            {
                "attempt": 1,
                "exception_class": "builtins.TimeoutError",
                "message": "upstream slow",
                "traceback": "Traceback (most recent call last):\n  ...\nTimeoutError: upstream slow\n" * 3,
            }
        ],
        logs_count=120,
    )
    JobLog.objects.bulk_create(
        JobLog(
            job_id=job.pk,
            attempt=1 + (i >= 40),
            seq=i + 1,
            time=now - timedelta(seconds=120 - i),
            level=20,
            logger="shop.render",
            message=f"rendered page {i} of the monthly invoice batch",
        )
        for i in range(120)
    )
    return job


@pytest.mark.parametrize("width", WIDTHS)
def test_a_running_jobs_page_is_compact(width, browser, live_server, superuser, screenshot_dir):
    job = a_chatty_running_job()
    context, page, errors = open_page(browser, live_server, width)
    page.goto(f"/admin/scheduler_app/job/{job.pk}/change/")
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(path=screenshot_dir / f"ops-running-job-{width}.png", full_page=True)
    found = page.evaluate(OVERFLOW)
    # The summary, the progress, the newest logs, and the rest one click away.
    assert page.locator("#sched-summary .sched-action-cancel").is_visible()
    assert page.locator(".sched-logs-attempt[open] li.sched-log").first.is_visible()
    context.close()
    print(f"running job page at {width}: {height} px")
    # 6,067 px before (this job: 120 log records, a traceback); 800 px wraps more.
    assert height <= (2200 if width >= 1280 else 2400), height
    assert found == [] and errors == []
