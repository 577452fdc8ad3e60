"""Issue 38, section 1: every operator action leaves an audit event (who, what, on what, when, through which door)."""

import logging

import pytest
from django.urls import reverse

from scheduler_app import lifecycle, schedules
from scheduler_app.models import AuditEvent, Job, JobStatus, Workflow
from tests.plumbing import ADD, grant, manage_in_process, token_client

pytestmark = pytest.mark.django_db


def only_event(**fields):
    [event] = AuditEvent.objects.filter(**fields)
    return event


# -- the API -----------------------------------------------------------------


def test_api_job_actions_are_recorded_with_who_and_via(api, staff_user, job_row):
    made = api.post("/api/jobs/", {"task": ADD, "args": [1, 2]}, format="json")
    assert made.status_code == 201
    job_id = made.json()["id"]
    assert api.patch(f"/api/jobs/{job_id}/", {"priority": 7}, format="json").status_code == 200
    assert api.post(f"/api/jobs/{job_id}/cancel/").status_code == 200
    assert api.post(f"/api/jobs/{job_id}/retry/").status_code == 200
    events = list(AuditEvent.objects.filter(object_type="job", object_id=str(job_id)).order_by("id"))
    assert [e.action for e in events] == ["create", "reschedule", "cancel", "retry"]
    assert {e.via for e in events} == {"api"} and {e.username for e in events} == {"staff"}
    assert all(e.user_id == staff_user.pk for e in events)
    assert events[1].detail == {"priority": 7} and events[2].detail == {"outcome": "cancelled"}


def test_api_bulk_actions_record_the_filter_and_the_count(api, job_row):
    for _ in range(3):
        job_row(status=JobStatus.PENDING, queue="slow")
    job_row(status=JobStatus.PENDING, queue="other")
    response = api.post("/api/jobs/cancel/", {"filter": {"queue": "slow"}}, format="json")
    assert response.status_code == 200
    event = only_event(action="bulk_cancel")
    assert (event.object_id, event.filter, event.count, event.via) == (None, {"queue": "slow"}, 3, "api")
    assert api.post("/api/jobs/retry/", {"filter": {"queue": "slow"}}, format="json").json() == {"retried": 3}
    assert only_event(action="bulk_retry").count == 3


def test_a_refused_action_records_nothing(api, job_row):
    job = job_row(status=JobStatus.SUCCEEDED)
    assert api.post(f"/api/jobs/{job.pk}/cancel/").status_code == 409
    assert api.patch(f"/api/jobs/{job.pk}/", {"priority": 3}, format="json").status_code == 409
    assert not AuditEvent.objects.exists()


def test_api_queue_schedule_and_workflow_actions(api):
    assert api.post("/api/queues/slow/pause/").status_code == 200
    assert api.post("/api/queues/slow/resume/").status_code == 200
    assert api.patch("/api/queues/slow/", {"concurrency_limit": 2}, format="json").status_code == 200
    assert [e.action for e in AuditEvent.objects.filter(object_type="queue", object_id="slow").order_by("id")] == [
        "pause",
        "resume",
        "set_limits",
    ]
    made = api.post(
        "/api/schedules/", {"name": "s", "task": ADD, "args": [1, 2], "interval_seconds": 60}, format="json"
    )
    assert made.status_code == 201, made.content
    sid = made.json()["id"]
    assert api.patch(f"/api/schedules/{sid}/", {"enabled": False}, format="json").status_code == 200
    assert api.post(f"/api/schedules/{sid}/run/").status_code == 201
    assert api.delete(f"/api/schedules/{sid}/").status_code == 204
    actions = [e.action for e in AuditEvent.objects.filter(object_type="schedule", object_id=str(sid)).order_by("id")]
    assert actions == ["create", "edit", "run_now", "delete"]
    flow = api.post("/api/workflows/", {"jobs": [{"task": ADD, "args": [1, 2]}]}, format="json")
    assert flow.status_code == 201, flow.content
    wid = flow.json()["id"]
    assert api.post(f"/api/workflows/{wid}/cancel/").status_code == 200
    assert api.post(f"/api/workflows/{wid}/retry/").status_code == 200
    actions = [e.action for e in AuditEvent.objects.filter(object_type="workflow", object_id=str(wid)).order_by("id")]
    assert actions == ["create", "cancel", "retry"]


def test_each_action_is_a_log_line_of_the_audit_logger(api, job_row, caplog, django_capture_on_commit_callbacks):
    job = job_row()
    with caplog.at_level(logging.INFO, logger="scheduler_app.audit"), django_capture_on_commit_callbacks(execute=True):
        api.post(f"/api/jobs/{job.pk}/cancel/")
    [line] = [r for r in caplog.records if r.name == "scheduler_app.audit"]
    assert line.getMessage().startswith(f"cancel job {job.pk} through the API by staff")
    assert line.job_id == job.pk and line.via == "api"


# -- the admin ---------------------------------------------------------------


def test_admin_job_buttons_and_actions(admin_client_, superuser, job_row):
    job = job_row()
    assert admin_client_.post(reverse("admin:scheduler_app_job_cancel", args=[job.pk])).status_code == 302
    assert admin_client_.post(reverse("admin:scheduler_app_job_retry", args=[job.pk])).status_code == 302
    event = AuditEvent.objects.filter(object_id=str(job.pk)).order_by("id").first()
    assert (event.action, event.via, event.user_id, event.detail) == (
        "cancel",
        "admin",
        superuser.pk,
        {"outcome": "cancelled"},
    )
    others = [job_row(status=JobStatus.FAILED) for _ in range(2)]
    changelist = reverse("admin:scheduler_app_job_changelist")
    response = admin_client_.post(
        changelist + "?status__exact=failed", {"action": "retry_jobs", "_selected_action": [j.pk for j in others]}
    )
    assert response.status_code == 302
    event = only_event(action="bulk_retry")
    assert event.filter == {"id__in": sorted(j.pk for j in others)} or sorted(event.filter["id__in"]) == sorted(
        j.pk for j in others
    )
    assert event.count == 2 and event.via == "admin"


def test_admin_select_across_records_the_list_filter(admin_client_, job_row):
    for _ in range(3):
        job_row(queue="slow")
    changelist = reverse("admin:scheduler_app_job_changelist") + "?queue=slow"
    selected = Job.objects.values_list("pk", flat=True).first()
    response = admin_client_.post(
        changelist,
        {"action": "cancel_jobs", "select_across": "1", "_selected_action": [selected], "confirmed": "1", "index": 0},
    )
    assert response.status_code == 302
    event = only_event(action="bulk_cancel")
    assert event.filter == {"queue": "slow"} and event.count == 3 and event.object_id is None


def test_admin_queue_pause_and_schedule_toggle(admin_client_):
    url = reverse("admin:scheduler_app_queue_toggle", args=["slow", "pause"])
    assert admin_client_.post(url).status_code == 302
    assert only_event(object_type="queue").action == "pause"
    schedule = schedules.create(name="nightly", task=ADD, args=[1, 2], interval_seconds=60)
    changelist = reverse("admin:scheduler_app_schedule_changelist")
    response = admin_client_.post(changelist, {"action": "disable", "_selected_action": [schedule.pk]})
    assert response.status_code == 302
    assert only_event(object_type="schedule").action == "disable"
    delete = reverse("admin:scheduler_app_schedule_delete", args=[schedule.pk])
    assert admin_client_.post(delete, {"post": "yes"}).status_code == 302
    assert AuditEvent.objects.filter(object_type="schedule", action="delete", object_id=str(schedule.pk)).exists()


def test_admin_workflow_retry(admin_client_):
    workflow, jobs = lifecycle.workflows.create_workflow([{"task": ADD, "args": [1, 2]}])
    lifecycle.cancel(jobs[0].pk)
    url = reverse("admin:scheduler_app_workflow_retry", args=[workflow.pk])
    assert admin_client_.post(url).status_code == 302
    event = only_event(object_type="workflow")
    assert (event.action, event.object_id, event.via) == ("retry", str(workflow.pk), "admin")
    assert Workflow.objects.filter(pk=workflow.pk).exists()


def test_the_job_history_page_lists_its_events(admin_client_, job_row):
    job = job_row()
    admin_client_.post(reverse("admin:scheduler_app_job_cancel", args=[job.pk]))
    page = admin_client_.get(reverse("admin:scheduler_app_job_history", args=[job.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Audit trail" in text and "cancel" in text and "admin" in text


# -- the commands ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_commands_record_with_the_system_user(job_row):
    code, out, err = manage_in_process("enqueue", ADD, "--args", "[1, 2]")
    assert code == 0, err
    event = only_event(object_type="job", action="create")
    assert event.via == "command" and event.object_id == out.strip() and event.user_id is None
    assert event.username == lifecycle.audit.command_user()
    code, out, err = manage_in_process("purgejobs", "--older-than", "0")
    assert code == 0, err
    assert only_event(action="prune").via == "command"


# -- retention ---------------------------------------------------------------


def test_prune_deletes_events_past_their_retention(api, settings):
    from datetime import timedelta

    from django.utils import timezone

    lifecycle.audit.record("pause", via="api", object_type="queue", object_id="slow")
    old = lifecycle.audit.record("resume", via="api", object_type="queue", object_id="slow")
    AuditEvent.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=91))
    assert lifecycle.audit.prune() == 1
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["pause"]
    settings.SCHEDULER = {**settings.SCHEDULER, "AUDIT_RETENTION": timedelta(0)}
    assert lifecycle.audit.prune(now=timezone.now() + timedelta(seconds=1)) == 1


# -- GET /api/audit/ ---------------------------------------------------------


def test_the_api_lists_newest_first_with_filters(api, job_row):
    job = job_row()
    api.post(f"/api/jobs/{job.pk}/cancel/")
    api.post("/api/queues/slow/pause/")
    body = api.get("/api/audit/").json()
    assert [e["action"] for e in body["results"]] == ["pause", "cancel"]
    entry = body["results"][1]
    assert set(entry) >= {"id", "at", "user", "action", "object_type", "object_id", "filter", "count", "via"}
    assert (entry["object_type"], entry["object_id"], entry["user"], entry["via"]) == ("job", job.pk, "staff", "api")
    assert body["results"][0]["object_id"] == "slow"
    only = api.get(f"/api/audit/?object_type=job&object_id={job.pk}").json()["results"]
    assert [e["action"] for e in only] == ["cancel"]
    assert api.get("/api/audit/?via=admin").json()["results"] == []
    assert len(api.get("/api/audit/?user=staff&action=pause").json()["results"]) == 1


@pytest.mark.parametrize(
    "query, field", [("object_type=jobs", "object_type"), ("via=web", "via"), ("action=" + "x" * 40, "action")]
)
def test_a_bad_filter_is_a_400_with_the_field(api, query, field):
    response = api.get("/api/audit/?" + query)
    assert response.status_code == 400 and field in response.json()


def test_staff_without_view_auditevent_get_403(staff_user, superuser):
    grant(staff_user, "view_job", "change_job")
    assert token_client(staff_user).get("/api/audit/").status_code == 403
    grant(staff_user, "view_auditevent")
    assert token_client(staff_user).get("/api/audit/").status_code == 200


def test_the_admin_audit_page_needs_the_permission_and_is_read_only(client, staff_user, superuser):
    grant(staff_user, "view_job")
    client.force_login(staff_user)
    url = reverse("admin:scheduler_app_auditevent_changelist")
    assert client.get(url).status_code == 403
    grant(staff_user, "view_auditevent")
    lifecycle.audit.record("pause", via="api", user=superuser, object_type="queue", object_id="slow")
    page = client.get(url + "?via=api&object_type=queue&object_id=slow&username=admin")
    assert page.status_code == 200 and "pause" in page.content.decode()
    assert client.get(reverse("admin:scheduler_app_auditevent_add")).status_code == 403
    event = AuditEvent.objects.get()
    assert (
        client.post(reverse("admin:scheduler_app_auditevent_delete", args=[event.pk]), {"post": "yes"}).status_code
        == 403
    )


def test_the_event_is_written_in_the_actions_transaction(api, job_row, monkeypatch):
    """An action whose audit event cannot be written is not done (and the reverse: no event without the action)."""
    job = job_row()

    def fail(*args, **kwargs):
        raise RuntimeError("audit table unavailable")

    monkeypatch.setattr(lifecycle.audit, "record", fail)
    with pytest.raises(RuntimeError):
        api.post(f"/api/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.status == JobStatus.PENDING and not AuditEvent.objects.exists()


def test_the_workflow_and_schedule_history_pages(admin_client_):
    workflow, jobs = lifecycle.workflows.create_workflow([{"task": ADD, "args": [1, 2]}])
    admin_client_.post(reverse("admin:scheduler_app_workflow_cancel", args=[workflow.pk]))
    page = admin_client_.get(reverse("admin:scheduler_app_workflow_history", args=[workflow.pk]))
    assert page.status_code == 200 and "cancel" in page.content.decode()
    schedule = schedules.create(name="s", task=ADD, args=[1, 2], interval_seconds=60)
    page = admin_client_.get(reverse("admin:scheduler_app_schedule_history", args=[schedule.pk]))
    assert page.status_code == 200 and "No operator action on it yet" in page.content.decode()
