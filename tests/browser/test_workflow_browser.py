"""A workflow's page in a real browser: the graph is one visible <svg>, nothing is clipped at 800 and 1280 px, nodes are links.

Screenshots at 800, 1280 and 1920 px go to the test artifacts
(``workflow-<width>.png``, ``workflow-grouped-1280.png``, ``workflows-1280.png``);
docs/img/ holds copies for docs/WORKFLOWS.md.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler_app.models import Job, JobDependency, JobStatus, Workflow
from tests.browser.test_layout_and_live import OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

S = "shop.tasks."


def _job(workflow, task, status, now, **fields):
    started = now - timedelta(seconds=40)
    if status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        fields = {"attempts": 1, "started_at": started, "finished_at": now, "worker": "host:1:abc", **fields}
    elif status == JobStatus.RUNNING:
        fields = {
            "attempts": 1,
            "started_at": started,
            "worker": "host:1:abc",
            "lease_expires_at": now + timedelta(seconds=30),
            **fields,
        }
    elif status == JobStatus.CANCELLED:
        fields = {"finished_at": now, **fields}
    return Job.objects.create(task=task, status=status, args=[], execute_at=now, workflow=workflow, **fields)


def _depend(job, *dependencies):
    JobDependency.objects.bulk_create(JobDependency(job=job, depends_on=d) for d in dependencies)
    Job.objects.filter(pk=job.pk).update(has_dependencies=True)
    Job.objects.filter(pk__in=[d.pk for d in dependencies]).update(has_dependents=True)


def invoices_workflow(renders=6):
    """fetch_orders -> render_invoice x renders (a group) -> merge_pdfs (the chord's step) -> email_accounting."""
    now = timezone.now()
    workflow = Workflow.objects.create(
        name="month-end-invoices", status="running", callbacks={"on_failure": {"task": S + "page_on_call"}}
    )
    fetch = _job(workflow, S + "fetch_orders", JobStatus.SUCCEEDED, now)
    states = [JobStatus.SUCCEEDED] * 3 + [JobStatus.RUNNING] * 2 + [JobStatus.PENDING]
    group = [_job(workflow, S + "render_invoice", states[i % len(states)], now) for i in range(renders)]
    for job in group:
        _depend(job, fetch)
    merge = _job(workflow, S + "merge_pdfs", JobStatus.WAITING, now, dependencies_left=3)
    _depend(merge, *group)
    email = _job(workflow, S + "email_accounting_department", JobStatus.WAITING, now, dependencies_left=1)
    _depend(email, merge)
    return workflow, [fetch, *group, merge, email]


def finished_workflows():
    """One that failed (its dependents cancelled), one that succeeded."""
    now = timezone.now()
    failed = Workflow.objects.create(name="import-customers", status="failed", finished_at=now)
    load = _job(failed, S + "load_csv", JobStatus.FAILED, now)
    for task in ("dedupe_customers", "index_customers"):
        _depend(_job(failed, S + task, JobStatus.CANCELLED, now), load)
    done = Workflow.objects.create(name="nightly-thumbnails", status="succeeded", finished_at=now)
    for _ in range(4):
        _job(done, S + "make_thumbnail", JobStatus.SUCCEEDED, now)


def login(browser, live_server, width, color_scheme="light"):
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        base_url=live_server.url,
        locale="en-GB",
        timezone_id="UTC",
        color_scheme=color_scheme,
    )
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw-admin-123")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return context, page


def test_the_graph_fits_800_and_1280_and_its_nodes_open_their_jobs(browser, live_server, superuser, screenshot_dir):
    workflow, jobs = invoices_workflow()
    for width in (800, 1280, 1920):
        context, page = login(browser, live_server, width)
        page.goto(f"/admin/scheduler_app/workflow/{workflow.pk}/change/")
        svg = page.locator("svg.sched-graph")
        assert svg.count() == 1 and svg.is_visible()
        nodes = page.locator("svg.sched-graph a.sched-node")
        assert nodes.count() == len(jobs)
        box = svg.bounding_box()
        assert box["width"] > 300 and box["x"] >= 0 and box["x"] + box["width"] <= width
        for i in range(nodes.count()):  # every node whole inside the window's width and inside the svg
            node = nodes.nth(i).bounding_box()
            assert node["x"] >= box["x"] - 1 and node["x"] + node["width"] <= box["x"] + box["width"] + 1
        assert page.evaluate(OVERFLOW) == []
        page.screenshot(path=screenshot_dir / f"workflow-{width}.png", full_page=True)
        if width == 800:
            target = jobs[-2]  # merge_pdfs
            page.locator(f'svg.sched-graph a.sched-node[data-job="{target.pk}"]').click()
            page.wait_for_url(f"**/admin/scheduler_app/job/{target.pk}/change/")
            page.click(".field-workflow_display a")  # and back, through the job page's link
            page.wait_for_url(f"**/admin/scheduler_app/workflow/{workflow.pk}/change/")
        context.close()
    context, page = login(browser, live_server, 1280, color_scheme="dark")
    page.goto(f"/admin/scheduler_app/workflow/{workflow.pk}/change/")
    assert page.locator("svg.sched-graph").is_visible() and page.evaluate(OVERFLOW) == []
    page.screenshot(path=screenshot_dir / "workflow-1280-dark.png", full_page=True)
    context.close()


def test_200_jobs_are_200_readable_nodes(browser, live_server, superuser, screenshot_dir):
    workflow, jobs = invoices_workflow(renders=197)  # 1 + 197 + 1 + 1 = 200 jobs, each its own node
    for width in (800, 1280):
        context, page = login(browser, live_server, width)
        page.goto(f"/admin/scheduler_app/workflow/{workflow.pk}/change/")
        nodes = page.locator("svg.sched-graph a.sched-node")
        assert nodes.count() == 200
        assert page.locator("svg.sched-graph .sched-frame").count() == 1  # the 197 side by side, framed
        text = page.locator(f'svg.sched-graph a.sched-node[data-job="{jobs[1].pk}"] text').first.bounding_box()
        assert text["height"] >= 8  # scaled down to the window, still legible
        assert page.evaluate(OVERFLOW) == []
        page.screenshot(path=screenshot_dir / f"workflow-200-{width}.png", full_page=width == 1280)
        context.close()


def test_a_grouped_graph_and_the_list(browser, live_server, superuser, screenshot_dir):
    workflow, jobs = invoices_workflow(renders=480)
    context, page = login(browser, live_server, 1280)
    page.goto(f"/admin/scheduler_app/workflow/{workflow.pk}/change/")
    nodes = page.locator("svg.sched-graph a.sched-node")
    assert nodes.count() == 4  # fetch, 480 renders as one node, merge, email
    assert page.locator("svg.sched-graph").is_visible()
    assert page.evaluate(OVERFLOW) == []
    page.screenshot(path=screenshot_dir / "workflow-grouped-1280.png", full_page=True)
    page.locator("svg.sched-graph a.sched-node-group").click()
    page.wait_for_url("**/admin/scheduler_app/job/?workflow=*")
    assert page.locator("#result_list tbody tr").count() == 50  # the first page of the group's 480 jobs
    finished_workflows()
    page.goto("/admin/scheduler_app/workflow/")
    assert page.locator("#result_list tbody tr").count() == 3
    assert page.evaluate(OVERFLOW) == []
    page.screenshot(path=screenshot_dir / "workflows-1280.png", full_page=True)
    context.close()
    context, page = login(browser, live_server, 800)
    page.goto("/admin/scheduler_app/workflow/")
    assert page.evaluate(OVERFLOW) == []
    page.screenshot(path=screenshot_dir / "workflows-800.png", full_page=True)
    context.close()
