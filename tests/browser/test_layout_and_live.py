"""Every page of the app fits 1280 and 800 px, light and dark; a running job's page moves by itself."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app import lifecycle, schedules
from scheduler_app.models import Job, JobStatus
from scheduler_app.observability import rollups
from scheduler_app.vocabulary.tallies import Tally
from tests.plumbing import dispatcher_thread, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = "tests.testapp.tasks."

# Overflow anywhere: the page wider than the window, a table or panel wider
# than its box (a clipped or scrolled-away column), a cell whose content
# spills out of it.
OVERFLOW = """() => {
  const width = window.innerWidth, found = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && el.className.baseVal === undefined ? '.' + String(el.className).trim().split(/\\s+/).join('.') : '');
  if (document.documentElement.scrollWidth > width + 1) found.push('page ' + document.documentElement.scrollWidth + ' > ' + width);
  for (const el of document.querySelectorAll('#content *')) {
    if (!el.offsetParent && el.tagName !== 'svg') continue;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || el.classList.contains('visually-hidden')) continue;  // screen-reader-only text
    if (r.right > width + 1) found.push(name(el) + ' ends at ' + Math.round(r.right));
    const style = getComputedStyle(el);
    if (['auto', 'scroll', 'hidden'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1 && !['TEXTAREA', 'SELECT', 'INPUT'].includes(el.tagName))
      found.push(name(el) + ' hides ' + (el.scrollWidth - el.clientWidth) + 'px');
    if ((el.tagName === 'TD' || el.tagName === 'TH') && el.scrollWidth > el.clientWidth + 1) found.push(name(el) + ' spills ' + (el.scrollWidth - el.clientWidth) + 'px: ' + el.textContent.trim().slice(0, 40));
  }
  return [...new Set(found)].slice(0, 20);
}"""


def seed():
    """Finished jobs, a failed one with logs (run for real), a schedule, a week of rollups."""
    now = timezone.now()
    with dispatcher_thread(rollup_interval=0.5):
        failed = lifecycle.enqueue(T + "chatty", [4, True], max_attempts=2)[0]
        for i in range(5):
            lifecycle.enqueue(T + "add", [i, i])
        assert wait_for(lambda: Job.objects.get(pk=failed.pk).status == JobStatus.FAILED)
    lifecycle.enqueue(T + "add", [1, 2], execute_at=now + timedelta(minutes=30))
    schedules.create(
        name="nightly-report-with-a-rather-long-name",
        task=T + "add",
        args=[1, 2],
        cron="0 2 * * 1-5",
        timezone="Europe/Berlin",
    )
    tallies = {}
    for minute in range(0, 7 * 24 * 60, 7):
        t = Tally(started=5, succeeded=4, retried=1)
        t.run.add(0.01 * (minute % 13))
        t.wait.add(0.002)
        at = (now - timedelta(minutes=minute)).replace(second=0, microsecond=0)
        tallies[(at.timestamp(), "default", T + "a_task_with_a_fairly_long_function_name")] = t
    rollups.record(tallies, now)
    return failed


PAGES = {
    "dashboard": "/admin/scheduler_app/dashboard/",
    "jobs": "/admin/scheduler_app/job/",
    "failed-job": None,
    "schedules": "/admin/scheduler_app/schedule/",
    "queues": "/admin/scheduler_app/queue/",
    # and the app's other pages
    "workers": "/admin/scheduler_app/worker/",
    "add-job": "/admin/scheduler_app/job/add/",
    "add-schedule": "/admin/scheduler_app/schedule/add/",
    "app-index": "/admin/scheduler_app/",
}


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 800])
def test_no_page_overflows_at_1280_and_800_in_light_and_dark(
    width, scheme, browser, live_server, superuser, screenshot_dir
):
    failed = seed()
    pages = {**PAGES, "failed-job": f"/admin/scheduler_app/job/{failed.pk}/change/"}
    problems = {}
    context = browser.new_context(
        viewport={"width": width, "height": 900}, base_url=live_server.url, color_scheme=scheme
    )
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    for name, url in pages.items():
        page.goto(url)
        if name in ("dashboard", "queues"):
            page.wait_for_selector("svg.sched-chart")
        if name == "failed-job":
            assert page.locator(".sched-log-error").count() == 2  # one ERROR line per attempt
        found = page.evaluate(OVERFLOW)
        if found:
            problems[name] = found
            page.screenshot(path=screenshot_dir / f"overflow-{name}-{width}-{scheme}.png", full_page=True)
    context.close()
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())


def test_a_running_jobs_page_shows_its_progress_moving_without_a_reload(logged_in, screenshot_dir):
    page = logged_in
    with dispatcher_thread():
        job = lifecycle.enqueue(T + "slow_progress", [40, 0.15])[0]
        assert wait_for(lambda: (Job.objects.get(pk=job.pk).progress or {}).get("current", 0) >= 1)
        page.goto(f"/admin/scheduler_app/job/{job.pk}/change/")
        page.evaluate("window.__sameLoad = true")
        page.select_option(".sched-live-interval", "2000")
        bar = page.locator(".field-progress_display progress")
        first = int(bar.get_attribute("value"))
        page.wait_for_function(
            "v => parseInt(document.querySelector('.field-progress_display progress').value) > v",
            arg=first,
            timeout=10_000,
        )
        assert page.evaluate("window.__sameLoad") is True
        assert "Running" in page.locator(".field-status_badge .sched-badge").inner_text()
        page.screenshot(path=screenshot_dir / "07-job-running-live.png")
        # Pausing stops the updates; resuming brings them back.
        page.click(".sched-live-toggle")
        assert page.locator(".sched-live-toggle").inner_text() == "Resume updates"
        refreshes = page.locator("#sched-live").get_attribute("data-refreshes")
        page.wait_for_timeout(2500)
        assert page.locator("#sched-live").get_attribute("data-refreshes") == refreshes
        page.click(".sched-live-toggle")
        page.wait_for_function("r => document.querySelector('#sched-live').dataset.refreshes !== r", arg=refreshes)
        assert wait_for(lambda: Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED, timeout=20)
        page.wait_for_function("() => document.body.dataset.jobStatus === 'succeeded'", timeout=10_000)
        assert "Succeeded" in page.locator(".field-status_badge .sched-badge").inner_text()
        assert page.locator(".sched-logs li").count() >= 10  # its log lines arrived too
        assert page.evaluate("window.__sameLoad") is True
