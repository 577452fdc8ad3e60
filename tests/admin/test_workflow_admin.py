"""The workflow admin: the list, a workflow's page and its graph, retry and cancel, permissions; the job page's link; the dashboard."""

import re

import pytest
from django.urls import reverse

from scheduler_app import lifecycle
from scheduler_app.admin import graph
from scheduler_app.models import Job, Workflow, WorkflowStatus
from tests.admin.workflow_fixtures import OTHER, chain_of, diamond, wide_chord, workflow_of
from tests.plumbing import grant

pytestmark = pytest.mark.django_db

WORKFLOWS = reverse("admin:scheduler_app_workflow_changelist")


def page_url(workflow):
    return reverse("admin:scheduler_app_workflow_change", args=[workflow.pk])


def retry_url(workflow):
    return reverse("admin:scheduler_app_workflow_retry", args=[workflow.pk])


def cancel_url(workflow):
    return reverse("admin:scheduler_app_workflow_cancel", args=[workflow.pk])


def the_svg(html):
    """Return the graph's <svg> element (the admin's own icons are other <svg>s), checking there is one."""
    found = re.findall(r'<svg class="sched-graph".*?</svg>', html, re.S)
    assert len(found) == 1
    return found[0]


def statuses(jobs):
    return [Job.objects.get(pk=j.pk).status for j in jobs]


class TestList:
    def test_lists_workflows_with_status_progress_and_counts_from_their_jobs(self, admin_client_, set_status):
        workflow, (a, b, c, d) = diamond()
        set_status(a, "succeeded")
        set_status(b, "running")
        html = admin_client_.get(WORKFLOWS).content.decode()
        assert "diamond" in html
        assert 'sched-badge sched-running">Running<' in html  # derived from the jobs, the row still says pending
        assert "1 / 4 done" in html
        assert 'sched-succeeded">Succeeded 1<' in html and 'sched-waiting">Waiting 2<' in html

    def test_filter_by_status_and_search_by_name_or_id(self, admin_client_):
        first, _ = chain_of(2, name="invoices-eu")
        second, _ = chain_of(2, name="thumbnails")
        Workflow.objects.filter(pk=second.pk).update(status=WorkflowStatus.FAILED)
        failed = admin_client_.get(WORKFLOWS + "?status__exact=failed").content.decode()
        assert "thumbnails" in failed and "invoices-eu" not in failed
        found = admin_client_.get(WORKFLOWS + "?q=invoice").content.decode()
        assert "invoices-eu" in found and "thumbnails" not in found
        by_id = admin_client_.get(WORKFLOWS + f"?q=%23{second.pk}").content.decode()
        assert "thumbnails" in by_id and "invoices-eu" not in by_id

    def test_one_query_counts_the_jobs_of_a_whole_page(self, admin_client_, django_assert_max_num_queries):
        for i in range(3):
            chain_of(3, name=f"wf-{i}")
        admin_client_.get(WORKFLOWS)
        with django_assert_max_num_queries(12) as few:
            admin_client_.get(WORKFLOWS)
        for i in range(3, 12):
            chain_of(3, name=f"wf-{i}")
        with django_assert_max_num_queries(len(few.captured_queries)):
            assert admin_client_.get(WORKFLOWS).status_code == 200

    def test_unusable_lookups_are_refused_not_a_500(self, admin_client_):
        for query in ("?status__exact=%00", "?q=%00", "?id__exact=99999999999999999999"):
            assert admin_client_.get(WORKFLOWS + query).status_code in (200, 302), query


class TestPage:
    def test_draws_one_svg_with_a_linked_node_per_job_and_an_arrow_per_dependency(self, admin_client_, set_status):
        workflow, jobs = diamond()
        set_status(jobs[0], "failed")
        html = admin_client_.get(page_url(workflow)).content.decode()
        svg = the_svg(html)
        assert "<script" not in svg
        assert svg.count('class="sched-node sched-node-') == 4
        for job in jobs:
            assert f'href="{reverse("admin:scheduler_app_job_change", args=[job.pk])}"' in svg
        assert svg.count('class="sched-edge"') == 4
        assert 'class="sched-node sched-node-failed" data-job="%d"' % jobs[0].pk in svg
        assert "sched-node-waiting" in svg
        assert "0 / 4 done" in html or "1 / 4 done" in html

    def test_a_chain_is_drawn_in_rows_top_to_bottom(self, admin_client_):
        workflow, jobs = chain_of(5)
        svg = the_svg(admin_client_.get(page_url(workflow)).content.decode())
        ys = [
            float(
                re.search(
                    r'data-job="%d"><title>.*?</title><rect class="sched-box" x="[\d.]+" y="([\d.]+)"' % j.pk, svg
                ).group(1)
            )
            for j in jobs
        ]
        assert ys == sorted(ys) and len(set(ys)) == 5

    def test_200_jobs_are_200_nodes(self, admin_client_):
        workflow, jobs = wide_chord(199)
        svg = the_svg(admin_client_.get(page_url(workflow)).content.decode())
        assert len(jobs) == graph.NODES_MAX
        assert svg.count('class="sched-node sched-node-') == 200
        # 199 jobs side by side wrap onto lines in one frame; their 199 arrows into the chord's job are one, from the frame.
        assert svg.count('class="sched-frame"') == 1 and svg.count('class="sched-edge"') == 1

    def test_beyond_200_jobs_the_jobs_of_a_row_with_one_task_are_one_node(self, admin_client_, set_status):
        workflow, jobs = wide_chord(240)
        set_status(jobs[0], "succeeded")
        html = admin_client_.get(page_url(workflow)).content.decode()
        svg = the_svg(html)
        assert svg.count('class="sched-node sched-node-') == 2  # 240 adds, and the chord's job
        assert ">240 jobs<" in svg and svg.count('class="sched-node sched-node-group"') == 1
        assert f'class="sched-node sched-node-waiting" data-job="{jobs[-1].pk}"' in svg  # a group of one is its job
        assert "239 pending" in svg and "1 succeeded" in svg  # the group's tooltip
        assert svg.count('class="sched-edge"') == 1
        group_link = f"{reverse('admin:scheduler_app_job_changelist')}?workflow={workflow.pk}&amp;task="
        assert group_link in svg
        listed = admin_client_.get(
            f"{reverse('admin:scheduler_app_job_changelist')}?workflow={workflow.pk}&task={OTHER}"
        )
        listed = listed.content.decode()
        assert reverse("admin:scheduler_app_job_change", args=[jobs[-1].pk]) in listed
        assert reverse("admin:scheduler_app_job_change", args=[jobs[0].pk]) not in listed
        assert "more than 200" in html

    def test_a_workflow_without_jobs_has_a_page(self, admin_client_):
        workflow = Workflow.objects.create(name="empty")
        html = admin_client_.get(page_url(workflow)).content.decode()
        assert "This workflow has no jobs." in html and "0 / 0 done" in html
        assert 'class="sched-graph"' not in html
        assert graph.render([], [], str, str)[0].count("<svg") == 1  # and the graph of nothing is still well-formed

    def test_odd_stored_rows_do_not_break_the_page(self, admin_client_, job_row):
        workflow = Workflow.objects.create(
            name="odd", callbacks={"on_success": "not a spec", "on_finish": {"task": "<b>x</b>"}}
        )
        job_row(task="<script>alert(1)</script>", workflow=workflow)
        job_row(status="failed", task="", workflow=workflow)
        response = admin_client_.get(page_url(workflow))
        html = response.content.decode()
        assert response.status_code == 200 and "<script>alert" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
        assert the_svg(html).count('class="sched-node ') == 2
        assert admin_client_.get(WORKFLOWS).status_code == 200

    def test_bad_ids_are_404(self, admin_client_):
        for bad in ("999999", "abc", "1\x00", "%00", "99999999999999999999", "-1"):
            url = f"/admin/scheduler_app/workflow/{bad}/change/"
            assert admin_client_.get(url).status_code == 404, bad
            assert admin_client_.post(url.replace("/change/", "/retry/")).status_code == 404, bad
            assert admin_client_.post(url.replace("/change/", "/cancel/")).status_code == 404, bad

    def test_the_job_page_links_to_its_workflow(self, admin_client_):
        workflow, jobs = chain_of(2, name="linked-one")
        plain = lifecycle.enqueue("tests.testapp.tasks.add", [1, 2])[0]
        html = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[jobs[1].pk])).content.decode()
        assert f'<a href="{page_url(workflow)}">linked-one</a>' in html
        html = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[plain.pk])).content.decode()
        assert "/admin/scheduler_app/workflow/" not in html.split("field-workflow_display")[1][:300]


class TestActions:
    def test_retry_brings_back_the_failed_job_and_the_dependents_cancelled_because_of_it(self, admin_client_):
        workflow, (a, b, c) = chain_of(3)
        lifecycle.cancel(a.pk)
        assert statuses([a, b, c]) == ["cancelled"] * 3
        response = admin_client_.post(retry_url(workflow))
        assert response.status_code == 302 and response["Location"] == page_url(workflow)
        assert statuses([a, b, c]) == ["pending", "waiting", "waiting"]
        errors = Job.objects.get(pk=b.pk).errors
        assert f"job {a.pk} was cancelled" in errors[-1]["message"]  # the errors keep what happened
        assert Workflow.objects.get(pk=workflow.pk).status == WorkflowStatus.PENDING
        assert (
            "Retried 3 failed or cancelled job(s); the workflow is pending."
            in admin_client_.get(page_url(workflow)).content.decode()
        )

    def test_a_refused_retry_says_why_and_changes_nothing(self, admin_client_):
        workflow, (a, b) = workflow_of([{"unique_key": "k1"}, {"depends_on_index": [0]}])
        lifecycle.cancel(a.pk)
        workflow_of([{"unique_key": "k1"}], name="the holder")
        html = admin_client_.post(retry_url(workflow), follow=True).content.decode()
        assert "Nothing was changed: Cannot retry " in html and "unique_key" in html
        assert statuses([a, b]) == ["cancelled", "cancelled"]

    def test_callbacks_are_drawn_last_and_not_counted(self, admin_client_, set_status):
        workflow, (a, b, callback) = workflow_of([{}, {"depends_on_index": [0]}, {}])
        set_status(a, "succeeded")
        set_status(b, "succeeded")
        Workflow.objects.filter(pk=workflow.pk).update(
            callbacks={
                "on_success": {"task": "tests.testapp.tasks.add", "args": [1, 2]},
                "enqueued": [{"callback": "on_success", "job": callback.pk}],
            }
        )
        html = admin_client_.get(page_url(workflow)).content.decode()
        assert "2 / 2 done" in html and 'sched-badge sched-succeeded">Succeeded<' in html
        assert (
            f'→ <a href="{reverse("admin:scheduler_app_job_change", args=[callback.pk])}">job #{callback.pk}</a>'
            in html
        )
        ys = {
            pk: float(y)
            for pk, y in re.findall(
                r'data-job="(\d+)"><title>.*?</title><rect class="sched-box" x="[\d.]+" y="([\d.]+)"', the_svg(html)
            )
        }
        assert ys[str(callback.pk)] > ys[str(b.pk)] > ys[str(a.pk)]
        # Named, and an arrow into it from the job the workflow ends with (b), not from a (b waits for a).
        svg = the_svg(html)
        node = re.search(
            rf'class="([^"]*)" data-job="{callback.pk}"><title>([^<]*)</title>.*?sched-node-sub">([^<]*)<', svg
        )
        assert "sched-node-callback" in node.group(1) and node.group(2).startswith("on_success callback: ")
        assert node.group(3).startswith("on_success · #")
        assert svg.count('class="sched-edge"') == 2  # a -> b, b -> the callback

    def test_cancel_cancels_pending_and_waiting_and_asks_running_jobs_to_stop(self, admin_client_, set_status):
        workflow, jobs = workflow_of([{}, {}, {"depends_on_index": [0]}])
        set_status(jobs[1], "running")
        assert admin_client_.post(cancel_url(workflow)).status_code == 302
        assert statuses(jobs) == ["cancelled", "running", "cancelled"]
        assert Job.objects.get(pk=jobs[1].pk).cancel_requested
        page = admin_client_.get(page_url(workflow)).content.decode()
        assert 'id="sched-wf-retry"' in page and 'id="sched-wf-cancel"' in page  # cancelled jobs; one still running
        assert "Cancelled the workflow&#x27;s 3 pending, waiting or running job(s)" in page

    def test_actions_are_posts(self, admin_client_):
        workflow, _ = chain_of(2)
        assert admin_client_.get(retry_url(workflow)).status_code == 405
        assert admin_client_.get(cancel_url(workflow)).status_code == 405

    def test_list_actions_retry_and_cancel_selected_workflows(self, admin_client_):
        workflow, jobs = chain_of(2)
        admin_client_.post(WORKFLOWS, {"action": "cancel_workflows", "_selected_action": [workflow.pk]})
        assert statuses(jobs) == ["cancelled", "cancelled"]
        admin_client_.post(WORKFLOWS, {"action": "retry_workflows", "_selected_action": [workflow.pk]})
        assert statuses(jobs) == ["pending", "waiting"]

    def test_list_actions_refuse_more_workflows_than_they_take(self, admin_client_, monkeypatch):
        from scheduler_app.admin import workflows as workflow_admin

        monkeypatch.setattr(workflow_admin, "MAX_ACTION_WORKFLOWS", 1)
        (first, jobs), (second, more) = chain_of(2), chain_of(2)
        response = admin_client_.post(
            WORKFLOWS, {"action": "cancel_workflows", "_selected_action": [first.pk, second.pk]}, follow=True
        )
        assert "More than 1 workflows are selected; nothing was changed." in response.content.decode()
        assert statuses(jobs + more) == ["pending", "waiting"] * 2


class TestPermissions:
    def test_anonymous_and_non_staff_are_sent_to_the_login(self, client, plain_user):
        workflow, jobs = chain_of(2)
        for who in (None, plain_user):
            if who:
                client.force_login(who)
            for url in (WORKFLOWS, page_url(workflow)):
                response = client.get(url)
                assert response.status_code == 302 and reverse("admin:login") in response["Location"]
            assert client.post(cancel_url(workflow)).status_code == 302
        assert statuses(jobs) == ["pending", "waiting"]

    def test_staff_without_permission_get_403(self, client, staff_user):
        workflow, jobs = chain_of(2)
        client.force_login(staff_user)
        assert client.get(WORKFLOWS).status_code == 403
        assert client.get(page_url(workflow)).status_code == 403
        assert client.post(cancel_url(workflow)).status_code == 403
        assert statuses(jobs) == ["pending", "waiting"]

    def test_view_permission_sees_the_page_but_cannot_act(self, client, staff_user):
        grant(staff_user, "view_workflow")
        workflow, jobs = chain_of(2)
        lifecycle.cancel(jobs[0].pk)
        client.force_login(staff_user)
        html = client.get(page_url(workflow)).content.decode()
        assert the_svg(html).count('class="sched-node ') == 2
        assert "<a " not in the_svg(html) and "List them" not in html  # no view_job: no links to a 403
        Workflow.objects.filter(pk=workflow.pk).update(
            callbacks={"on_failure": {"task": "x.y"}, "enqueued": [{"callback": "on_failure", "job": jobs[0].pk}]}
        )
        assert f"on_failure: <code>x.y</code> → job #{jobs[0].pk}" in client.get(page_url(workflow)).content.decode()
        assert 'id="sched-wf-retry"' not in html and 'id="sched-wf-cancel"' not in html
        assert "retry_workflows" not in client.get(WORKFLOWS).content.decode()
        assert client.post(retry_url(workflow)).status_code == 403
        client.post(WORKFLOWS, {"action": "retry_workflows", "_selected_action": [workflow.pk]})
        assert statuses(jobs) == ["cancelled", "cancelled"]

    def test_change_permission_acts(self, client, staff_user):
        grant(staff_user, "view_workflow", "change_workflow")
        workflow, jobs = chain_of(2)
        lifecycle.cancel(jobs[0].pk)
        client.force_login(staff_user)
        html = client.get(page_url(workflow)).content.decode()
        assert 'id="sched-wf-retry"' in html and "csrfmiddlewaretoken" in html
        grant(staff_user, "view_job")
        assert the_svg(client.get(page_url(workflow)).content.decode()).count("<a href=") == 2
        assert client.post(retry_url(workflow)).status_code == 302
        assert statuses(jobs) == ["pending", "waiting"]

    def test_the_buttons_need_the_csrf_token(self, staff_user):
        from django.test import Client

        grant(staff_user, "view_workflow", "change_workflow")
        workflow, jobs = chain_of(2)
        client = Client(enforce_csrf_checks=True)
        client.force_login(staff_user)
        assert client.post(cancel_url(workflow)).status_code == 403
        assert statuses(jobs) == ["pending", "waiting"]

    def test_nothing_is_added_or_deleted_here(self, admin_client_):
        workflow, _ = chain_of(2)
        assert admin_client_.get("/admin/scheduler_app/workflow/add/", follow=True).status_code == 404
        assert (
            admin_client_.post(f"/admin/scheduler_app/workflow/{workflow.pk}/delete/", follow=True).status_code == 404
        )
        assert "/admin/scheduler_app/workflow/add/" not in admin_client_.get(WORKFLOWS).content.decode()
        assert Workflow.objects.filter(pk=workflow.pk).exists()


def test_the_dashboard_counts_running_and_failed_workflows(admin_client_):
    # The stored status: the transaction that ends each job of a workflow stores it (lifecycle.workflows.refresh).
    for name, status in [("a", "running"), ("b", "running"), ("c", "failed"), ("d", "pending"), ("e", "succeeded")]:
        Workflow.objects.create(name=name, status=status)
    data = admin_client_.get(reverse("admin:scheduler_app_dashboard_data")).json()
    assert data["workflows"] == {"running": 2, "failed": 1}
    html = admin_client_.get(reverse("admin:scheduler_app_dashboard")).content.decode()
    assert 'id="sched-workflows-running">2<' in html and 'id="sched-workflows-failed">1<' in html
    assert f"{WORKFLOWS}?status__exact=failed" in html
