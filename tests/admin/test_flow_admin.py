"""The admin's side of flow control: queue limits (edited, checked, shown against their use), a job's workflow."""

import pytest
from django.test import override_settings
from django.urls import reverse

from scheduler_app import lifecycle
from scheduler_app.models import Queue
from tests.plumbing import ADD, grant

pytestmark = pytest.mark.django_db

QUEUES = reverse("admin:scheduler_app_queue_changelist")


def queue_url(name):
    return reverse("admin:scheduler_app_queue_change", args=[name])


def job_url(job):
    return reverse("admin:scheduler_app_job_change", args=[job.pk])


def form(**limits):
    return {"concurrency_limit": "", "rate_limit": "", "rate_period": "1", **limits}


class TestQueueAdmin:
    @override_settings(SCHEDULER={"QUEUES": {"slow": {"concurrency_limit": 2}}})
    def test_the_list_shows_every_served_queue_with_its_limits_against_their_use(self, admin_client_, job_row):
        job_row("running", queue="slow")
        page = admin_client_.get(QUEUES).content.decode()
        assert set(Queue.objects.values_list("name", flat=True)) == {"default", "slow", "other"}
        assert "1 / 2 running" in page and "no limit" in page
        assert "/admin/scheduler_app/queue/add/" not in page  # queues come from settings
        assert queue_url("slow") in page  # each queue's limits form, for who may change them

    def test_limits_are_edited_through_the_service(self, admin_client_, monkeypatch):
        calls = []
        original = lifecycle.set_limits
        monkeypatch.setattr(
            lifecycle, "set_limits", lambda name, **kw: calls.append((name, kw)) or original(name, **kw)
        )
        self._seed()
        response = admin_client_.post(
            queue_url("slow"), form(concurrency_limit="5", rate_limit="100", rate_period="60")
        )
        assert response.status_code == 302
        queue = Queue.objects.get(name="slow")
        assert (queue.concurrency_limit, queue.rate_limit, queue.rate_period) == (5, 100, 60.0)
        assert calls == [("slow", {"concurrency_limit": 5, "rate_limit": 100, "rate_period": 60.0})]
        page = admin_client_.get(queue_url("slow")).content.decode()
        assert "0 / 5 running; 0 / 100 started per 60 s" in page

    def test_a_bad_limit_is_an_inline_error_and_changes_nothing(self, admin_client_):
        self._seed()
        response = admin_client_.post(queue_url("slow"), form(concurrency_limit="0", rate_period="x"))
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors
        assert errors == {
            "concurrency_limit": ["Must be a whole number from 1 to 100000."],
            "rate_period": [
                "Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."
            ],
        }
        assert Queue.objects.get(name="slow").concurrency_limit is None

    @pytest.mark.parametrize("period", ["5e-324", "0.0009", "1e400", "nan"])
    def test_a_period_shorter_than_a_millisecond_is_refused(self, admin_client_, period):
        self._seed()
        response = admin_client_.post(queue_url("slow"), form(rate_limit="10", rate_period=period))
        assert response.status_code == 200
        assert response.context["adminform"].form.errors == {
            "rate_period": [
                "Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."
            ]
        }
        assert Queue.objects.get(name="slow").rate_limit is None

    def test_view_only_staff_cannot_change_limits(self, client, staff_user):
        self._seed()
        client.force_login(grant(staff_user, "view_queue"))
        assert client.get(QUEUES).status_code == 200
        client.post(queue_url("slow"), form(concurrency_limit="3"))
        assert Queue.objects.get(name="slow").concurrency_limit is None
        assert queue_url("slow") not in client.get(QUEUES).content.decode()  # no edit link
        assert client.get("/admin/scheduler_app/queue/slow/delete/").status_code in (403, 404)

    @staticmethod
    def _seed():
        lifecycle.ensure_queues(["default", "slow", "other"])
        return True


class TestWorkflowOnTheJobPage:
    def test_dependencies_and_dependents_are_linked_with_their_status(self, admin_client_):
        first, _ = lifecycle.enqueue(ADD, [1, 1])
        second, _ = lifecycle.enqueue(ADD, [2, 2], depends_on=[first.pk])
        page = admin_client_.get(job_url(second)).content.decode()
        assert f'<a href="{job_url(first)}">#{first.pk}</a>' in page
        assert '<span class="sched-badge sched-pending">Pending</span>' in page
        assert '<span class="sched-badge sched-waiting">Waiting</span>' in page
        page = admin_client_.get(job_url(first)).content.decode()
        assert f'<a href="{job_url(second)}">#{second.pk}</a>' in page

    def test_the_list_filters_jobs_waiting_on_dependencies_and_a_jobs_dependents(self, admin_client_):
        first, _ = lifecycle.enqueue(ADD, [1, 1])
        second, _ = lifecycle.enqueue(ADD, [2, 2], depends_on=[first.pk])
        changelist = reverse("admin:scheduler_app_job_changelist")
        waiting = admin_client_.get(changelist, {"dependencies": "waiting"})
        assert "Waiting on dependencies" in waiting.content.decode()
        assert [j.pk for j in waiting.context["cl"].result_list] == [second.pk]
        assert [
            j.pk for j in admin_client_.get(changelist, {"status__exact": "waiting"}).context["cl"].result_list
        ] == [second.pk]
        assert [j.pk for j in admin_client_.get(changelist, {"depends_on": first.pk}).context["cl"].result_list] == [
            second.pk
        ]


def test_the_dashboard_shows_each_limit_against_its_use(admin_client_, job_row):
    lifecycle.set_limits("slow", concurrency_limit=3, rate_limit=10, rate_period=60)
    job_row("running", queue="slow")
    html = admin_client_.get(reverse("admin:scheduler_app_dashboard_data")).json()["html"]["queues"]
    assert '<td class="num" data-col="running" title="concurrency limit 3">1 / 3</td>' in html
    assert "0 / 10 per 60 s" in html
