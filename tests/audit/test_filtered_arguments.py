"""Issue 38, section 2: FILTER_ARGUMENTS' values are [FILTERED] on every surface; the task gets the real ones."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from scheduler_app import conf, lifecycle, schedules, testing
from scheduler_app.models import AuditEvent, Job, Schedule
from scheduler_app.vocabulary.redaction import FILTERED, redact, redact_head, restore

pytestmark = pytest.mark.django_db

ECHO = "tests.testapp.tasks.echo_kwargs"
SECRET = "hunter2-s3cr3t"
KWARGS = {
    "user": "ann",
    "Password": SECRET,
    "nested": {"deeper": [{"API_KEY": "key-0451"}], "ok": 1},
    "credentials": {"id": "x", "secret": "inner"},
}
SHOWN = {
    "user": "ann",
    "Password": FILTERED,
    "nested": {"deeper": [{"API_KEY": FILTERED}], "ok": 1},
    "credentials": FILTERED,
}


def no_secret(text):
    assert SECRET not in text and "key-0451" not in text and "inner" not in text


# -- the rule ----------------------------------------------------------------


def test_redact_any_case_any_depth_and_restore_puts_back_what_was_echoed():
    names = frozenset({"password", "api_key", "credentials"})
    assert redact(KWARGS, names) == SHOWN
    assert redact(KWARGS, frozenset()) == KWARGS
    assert restore(SHOWN, KWARGS, names) == KWARGS
    # A new value replaces the secret; a filtered key the old value did not have keeps its text.
    changed = {**SHOWN, "Password": "new-one", "token": FILTERED}
    assert restore(changed, KWARGS, names | {"token"}) == {**KWARGS, "Password": "new-one", "token": FILTERED}


def test_a_cut_preview_stops_before_the_first_filtered_value():
    names = frozenset({"password"})
    head = '{"user": "ann", "pass\\u0077ord": "hunter2", "x": "'
    assert redact_head(head, names) == '{"user": "ann", "pass\\u0077ord": "[FILTERED]"'
    assert redact_head('{"user": "ann"', names) == '{"user": "ann"'


def test_the_default_and_a_bad_setting(settings):
    assert {"password", "token", "secret", "api_key", "authorization"} <= conf.filter_names()
    settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": ["Pin"]}
    assert conf.filtered({"PIN": 1, "password": "p"}) == {"PIN": FILTERED, "password": "p"}
    for bad in ("password", ["ok", 3], [""]):
        settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": bad}
        with pytest.raises(
            ImproperlyConfigured, match=r"SCHEDULER\['FILTER_ARGUMENTS'\].*list of keyword-argument names"
        ):
            conf.filtered({})


def test_the_same_list_read_again_and_a_list_changed_in_place(settings):
    words = ["Pin"]
    settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": words}
    assert conf.filter_names() == {"pin"}
    assert conf.filter_names() == {"pin"}  # the same list again
    words.append("Otp")
    assert conf.filter_names() == {"pin", "otp"}
    words.append(3)
    with pytest.raises(ImproperlyConfigured, match=r"SCHEDULER\['FILTER_ARGUMENTS'\]"):
        conf.filter_names()


def test_the_system_check_reports_a_bad_setting(settings):
    from django.core import checks

    settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": "password"}
    found = [m for m in checks.run_checks() if "FILTER_ARGUMENTS" in str(m.msg) or "FILTER_ARGUMENTS" in str(m.obj)]
    assert found and found[0].level >= checks.ERROR


# -- the task gets the real values ------------------------------------------


def test_the_task_receives_the_real_values():
    job, _ = lifecycle.enqueue(ECHO, [], KWARGS)
    testing.drain()
    job.refresh_from_db()
    assert job.status == "succeeded" and job.result == KWARGS and job.kwargs == KWARGS


# -- the API ------------------------------------------------------------------


def test_api_job_detail_list_and_create_show_filtered(api):
    made = api.post("/api/jobs/", {"task": ECHO, "kwargs": KWARGS}, format="json")
    assert made.status_code == 201 and made.json()["kwargs"] == SHOWN
    no_secret(made.content.decode())
    job_id = made.json()["id"]
    detail = api.get(f"/api/jobs/{job_id}/")
    assert detail.json()["kwargs"] == SHOWN
    listed = api.get("/api/jobs/")
    assert listed.json()["results"][0]["kwargs"] == SHOWN
    no_secret(listed.content.decode())
    assert Job.objects.get(pk=job_id).kwargs == KWARGS


def test_api_list_preview_of_a_long_value_is_cut_before_the_secret(api, job_row):
    long = {"a": "x" * 5000, "password": SECRET}
    job_row(task=ECHO, args=[], kwargs={"password": SECRET, "a": "x" * 5000})
    job_row(task=ECHO, args=[], kwargs=long)
    body = api.get("/api/jobs/").content.decode()
    no_secret(body)


def test_a_patch_or_retry_echoing_the_representation_keeps_the_real_value(api, job_row):
    made = api.post("/api/jobs/", {"task": ECHO, "kwargs": KWARGS}, format="json").json()
    echoed = api.patch(f"/api/jobs/{made['id']}/", {"kwargs": made["kwargs"], "priority": 3}, format="json")
    assert echoed.status_code == 400  # a job's kwargs are not patched: refused, nothing changed
    assert Job.objects.get(pk=made["id"]).kwargs == KWARGS
    api.post(f"/api/jobs/{made['id']}/cancel/")
    # A retry's body is {"now": ...} only: an echo is refused whole, nothing changed; a retry runs the real values.
    assert api.post(f"/api/jobs/{made['id']}/retry/", made, format="json").status_code == 400
    assert Job.objects.get(pk=made["id"]).kwargs == KWARGS
    assert api.post(f"/api/jobs/{made['id']}/retry/", {"now": True}, format="json").status_code == 200
    assert Job.objects.get(pk=made["id"]).kwargs == KWARGS


def test_schedule_kwargs_shown_filtered_and_a_patch_echo_keeps_them(api):
    made = api.post(
        "/api/schedules/", {"name": "n", "task": ECHO, "kwargs": KWARGS, "interval_seconds": 60}, format="json"
    )
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["kwargs"] == SHOWN
    sid = body["id"]
    changed = {**body["kwargs"], "user": "bob"}
    response = api.patch(f"/api/schedules/{sid}/", {"kwargs": changed}, format="json")
    assert response.status_code == 200, response.content
    assert Schedule.objects.get(pk=sid).kwargs == {**KWARGS, "user": "bob"}
    assert api.get(f"/api/schedules/{sid}/").json()["kwargs"] == {**SHOWN, "user": "bob"}
    no_secret(api.get("/api/schedules/").content.decode())
    # A new secret is taken as sent.
    api.patch(f"/api/schedules/{sid}/", {"kwargs": {**changed, "Password": "rotated"}}, format="json")
    assert Schedule.objects.get(pk=sid).kwargs["Password"] == "rotated"


def test_workflow_callbacks_are_filtered(api):
    body = {"jobs": [{"task": ECHO, "kwargs": KWARGS}], "on_success": {"task": ECHO, "kwargs": KWARGS}}
    made = api.post("/api/workflows/", body, format="json")
    assert made.status_code == 201, made.content
    shown = api.get(f"/api/workflows/{made.json()['id']}/")
    assert shown.json()["callbacks"]["on_success"]["kwargs"] == SHOWN
    no_secret(shown.content.decode())


def test_searching_a_secret_finds_nothing_but_other_text_still_finds_the_job(api, job_row):
    job = job_row(task=ECHO, args=[{"token": "tok-998877"}], kwargs=KWARGS)
    for text in (SECRET, "hunter2", "key-0451", "inner", "tok-9988"):
        response = api.get(f"/api/jobs/?search={text}")
        assert response.status_code == 200 and response.json()["results"] == [], text
    assert [j["id"] for j in api.get("/api/jobs/?search=ann").json()["results"]] == [job.pk]
    assert [j["id"] for j in api.get("/api/jobs/?search=echo_kwargs").json()["results"]] == [job.pk]


def test_the_audit_entry_and_its_log_line_hold_no_secret(api, caplog, django_capture_on_commit_callbacks):
    with caplog.at_level("INFO", logger="scheduler_app.audit"), django_capture_on_commit_callbacks(execute=True):
        api.post("/api/jobs/", {"task": ECHO, "kwargs": KWARGS}, format="json")
    event = AuditEvent.objects.get()
    assert event.detail["kwargs"] == SHOWN
    no_secret(caplog.text)
    no_secret(api.get("/api/audit/").content.decode())


# -- the admin ----------------------------------------------------------------


def test_admin_job_page_and_list_show_filtered(admin_client_):
    job, _ = lifecycle.enqueue(ECHO, [], KWARGS)
    page = admin_client_.get(reverse("admin:scheduler_app_job_change", args=[job.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "[FILTERED]" in text
    no_secret(text)
    listed = admin_client_.get(reverse("admin:scheduler_app_job_changelist") + "?q=echo")
    assert listed.status_code == 200
    no_secret(listed.content.decode())
    assert list(listed.context["cl"].result_list) == [job]
    searched = admin_client_.get(reverse("admin:scheduler_app_job_changelist"), {"q": SECRET})
    assert searched.status_code == 200 and list(searched.context["cl"].result_list) == []


def test_admin_schedule_form_shows_filtered_and_saving_it_keeps_the_secret(admin_client_):
    schedule = schedules.create(name="nightly", task=ECHO, kwargs=KWARGS, interval_seconds=60)
    url = reverse("admin:scheduler_app_schedule_change", args=[schedule.pk])
    page = admin_client_.get(url)
    text = page.content.decode()
    assert "[FILTERED]" in text
    no_secret(text)
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    for name in ("start_at", "end_at"):
        data.pop(name, None)
    data.update({"enabled": "on", "_save": "Save"})
    response = admin_client_.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    assert Schedule.objects.get(pk=schedule.pk).kwargs == KWARGS


# -- what the scheduler stores about a run -----------------------------------


def test_an_error_that_quotes_a_secret_keeps_filtered(api):
    job, _ = lifecycle.enqueue("tests.testapp.tasks.leaky", [], {"password": SECRET}, max_attempts=1)
    testing.drain()
    job.refresh_from_db()
    assert job.status == "failed"
    [error] = job.errors
    assert error["message"] == "login refused for password [FILTERED]"
    no_secret(repr(job.errors))
    no_secret(api.get(f"/api/jobs/{job.pk}/").content.decode())


@pytest.mark.django_db(transaction=True)
def test_log_records_that_quote_a_secret_keep_filtered(staff_user):
    from scheduler_app.models import JobLog
    from tests.plumbing import dispatcher_thread, grant, token_client, wait_for

    job, _ = lifecycle.enqueue("tests.testapp.tasks.leaky", [], {"password": SECRET}, max_attempts=1)
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.filter(pk=job.pk, status="failed").exists())
    messages = list(JobLog.objects.filter(job=job).values_list("message", flat=True))
    assert messages == ["logging in with [FILTERED]"]
    api = token_client(grant(staff_user))
    no_secret(api.get(f"/api/jobs/{job.pk}/logs/").content.decode())


def test_search_hides_numbers_quotes_and_nested_values_too(api, job_row, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": ["pin", "password", "credentials"]}
    job = job_row(
        task=ECHO,
        args=[],
        kwargs={"PIN": 987654, "password": 'say "open sesame"', "credentials": {"user": "root-x1"}, "note": "n-77"},
    )
    for text in ("987654", 'say "open', "root-x1"):
        response = api.get("/api/jobs/", {"search": text})
        assert response.status_code == 200 and response.json()["results"] == [], text
    assert [j["id"] for j in api.get("/api/jobs/", {"search": "n-77"}).json()["results"]] == [job.pk]
    settings.SCHEDULER = {**settings.SCHEDULER, "FILTER_ARGUMENTS": []}
    assert [j["id"] for j in api.get("/api/jobs/", {"search": "987654"}).json()["results"]] == [job.pk]


def test_djangos_line_about_the_failed_attempt_keeps_filtered(caplog):
    with caplog.at_level("DEBUG", logger="django.tasks"):
        lifecycle.enqueue("tests.testapp.tasks.leaky", [], {"password": SECRET}, max_attempts=1)
        testing.drain()
    # The lines the scheduler and Django write about the run (the task's own logger is the task's business).
    lines = [r for r in caplog.records if r.name == "django.tasks" or r.name.startswith("scheduler_app")]
    assert any(r.name == "django.tasks" and r.exc_info for r in lines), "no line of django.tasks with the error"
    text = "\n".join(caplog.handler.format(r) for r in lines)
    assert "login refused for password [FILTERED]" in text
    no_secret(text)
