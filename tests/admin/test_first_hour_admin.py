"""The first hour in the admin (issue 38, 5e): what a view-only user sees, the queue buttons, breadcrumbs, the favicon."""

import pytest
from django.test import Client

from tests.plumbing import grant

pytestmark = pytest.mark.django_db


def test_a_view_only_user_is_not_offered_to_schedule_a_job(client, staff_user):
    grant(staff_user, "view_job", "view_dashboard")
    client.force_login(staff_user)
    dashboard = client.get("/admin/scheduler_app/dashboard/").content.decode()
    assert "Schedule a job" not in dashboard and "/admin/scheduler_app/job/add/" not in dashboard
    assert "/admin/scheduler_app/job/add/" not in client.get("/admin/scheduler_app/job/").content.decode()
    assert client.get("/admin/scheduler_app/job/add/").status_code == 403
    grant(staff_user, "add_job")
    assert "Schedule a job" in client.get("/admin/scheduler_app/dashboard/").content.decode()


def test_the_queue_buttons_say_queue_and_a_pause_says_what_it_did(admin_client_):
    page = admin_client_.get("/admin/scheduler_app/dashboard/").content.decode()
    assert ">Pause queue</button>" in page and "Pause updates" in page
    answer = admin_client_.post(
        "/admin/scheduler_app/dashboard/queues/default/pause/", HTTP_ACCEPT="application/json"
    ).json()
    assert answer["paused"] is True and answer["message"].startswith("Queue “default” paused")


def test_the_bulk_confirmation_has_the_admins_breadcrumbs(admin_client_, job_row):
    for _ in range(3):
        job_row("failed")
    page = admin_client_.post(
        "/admin/scheduler_app/job/", {"action": "retry_jobs", "select_across": "1", "_selected_action": ["1"]}
    ).content.decode()
    assert 'id="bulk-count"' in page
    assert '<ol class="breadcrumbs">' in page and '<li aria-current="page">' in page


def test_every_page_names_a_favicon_and_favicon_ico_answers(admin_client_):
    page = admin_client_.get("/admin/scheduler_app/job/").content.decode()
    assert 'rel="icon" href="/static/scheduler_app/img/favicon.svg"' in page
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("scheduler_app/img/favicon.svg")
