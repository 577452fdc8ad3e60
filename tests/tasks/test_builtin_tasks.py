"""The built-in tasks: run an allowed command, send an email, call a webhook (tests/tasks/test_webhooks.py has the webhook's rules)."""

import time

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.tasks.exceptions import InvalidTask
from django.test import override_settings

from scheduler_app import lifecycle, schedules, tasks
from scheduler_app.models import Job, Schedule
from scheduler_app.testing import drain
from tests.plumbing import manage_in_process
from tests.tasks.rawhttp import answer

LOCMEM = override_settings(
    MAILERS={"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}},
    DEFAULT_FROM_EMAIL="Scheduler <scheduler@example.com>",
)


REFUSED = (
    "Command 'purgejobs' is not allowed: run_command runs only the commands "
    'SCHEDULER["RUN_COMMAND_ALLOWED"] lists (none).'
)
ALLOW_PURGE = override_settings(SCHEDULER={"RUN_COMMAND_ALLOWED": ["purgejobs"]})


@pytest.mark.django_db
def test_run_command_runs_only_allowed_commands():
    with pytest.raises(PermissionError) as refused:
        tasks.run_command.call("purgejobs", "--dry-run")
    assert str(refused.value) == REFUSED
    with ALLOW_PURGE:
        assert "would be deleted" in tasks.run_command.call("purgejobs", "--dry-run")
        with pytest.raises(PermissionError, match=r"'flush' is not allowed.*\(purgejobs\)"):
            tasks.run_command.call("flush", "--no-input")


@pytest.mark.django_db
class TestRunCommandIsRefusedWhenTheJobIsMade:
    """The issue: a user with add_job ran run_command("purgejobs") and deleted all history."""

    def test_enqueue(self):
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("scheduler_app.tasks.run_command", ["purgejobs", "--older-than", "0"])
        assert caught.value.message_dict == {"args": [REFUSED]}
        with pytest.raises(ValidationError) as caught:
            lifecycle.enqueue("scheduler_app.tasks.run_command", [], {"name": 7})
        assert list(caught.value.message_dict) == ["kwargs"] and "Command 7 is not allowed" in caught.value.messages[0]
        assert not Job.objects.exists()

    def test_enqueue_many_and_schedules(self):
        with pytest.raises(lifecycle.BulkValidationError) as bulk:
            lifecycle.enqueue_many(
                [
                    {"task": "tests.testapp.tasks.noop"},
                    {"task": "scheduler_app.tasks.run_command", "args": ["purgejobs"]},
                ]
            )
        assert bulk.value.by_index == {1: {"args": [REFUSED]}}
        with pytest.raises(ValidationError) as caught:
            schedules.create(
                name="purge", task="scheduler_app.tasks.run_command", args=["purgejobs"], interval_seconds=60
            )
        assert caught.value.message_dict == {"args": [REFUSED]}
        assert not Job.objects.exists() and not Schedule.objects.exists()

    def test_the_tasks_backend(self):
        with pytest.raises(InvalidTask, match=r"args: Command .purgejobs. is not allowed.*RUN_COMMAND_ALLOWED"):
            tasks.run_command.enqueue("purgejobs")
        assert not Job.objects.exists()

    @ALLOW_PURGE
    def test_an_allowed_command_is_made_and_runs(self):
        result = tasks.run_command.enqueue("purgejobs", "--dry-run")
        assert drain()["succeeded"] == 1
        assert "would be deleted" in Job.objects.get(pk=int(result.id)).result

    def test_a_job_made_while_allowed_is_refused_when_it_runs_after_the_setting_changed(self):
        with ALLOW_PURGE:
            job, _ = lifecycle.enqueue("scheduler_app.tasks.run_command", ["purgejobs"], max_attempts=1)
        assert drain()["failed"] == 1
        job.refresh_from_db()
        assert job.status == "failed" and job.errors[-1]["exception_class"] == "builtins.PermissionError"
        assert job.errors[-1]["message"] == REFUSED


@pytest.mark.django_db(transaction=True)
def test_the_enqueue_command_refuses_it_in_one_line():
    code, out, err = manage_in_process("enqueue", "scheduler_app.tasks.run_command", "--args", '["purgejobs"]')
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"CommandError: args: {REFUSED}"]
    assert not Job.objects.exists()


@LOCMEM
def test_send_email_comes_from_default_from_email():
    assert tasks.send_email.call(["a@example.com", "b@example.com"], "Hello", "Body") == 1
    sent = mail.outbox[-1]
    assert sent.to == ["a@example.com", "b@example.com"] and sent.subject == "Hello"
    assert sent.from_email == "Scheduler <scheduler@example.com>"


@LOCMEM
@pytest.mark.parametrize("sender", ["ceo@example.com", "Scheduler <ceo@example.com>", "", ["scheduler@example.com"]])
def test_send_email_refuses_a_from_address_that_is_not_allowed(sender):
    with pytest.raises(PermissionError, match=r"EMAIL_FROM_ALLOWED.*DEFAULT_FROM_EMAIL"):
        tasks.send_email.call("a@example.com", "Hi", "Body", from_email=sender)
    assert mail.outbox == []


@LOCMEM
@pytest.mark.parametrize("sender", ["scheduler@example.com", "Ops <OPS@example.com>"])
def test_send_email_takes_default_from_email_and_allowed_addresses(settings, sender):
    settings.SCHEDULER = {**settings.SCHEDULER, "EMAIL_FROM_ALLOWED": ["ops@example.com"]}
    assert tasks.send_email.call("a@example.com", "Hi", "Body", from_email=sender) == 1
    assert mail.outbox[-1].from_email == sender


@pytest.mark.django_db(transaction=True)
def test_a_refused_webhook_fails_its_job_with_a_clear_error():
    job, _ = lifecycle.enqueue(
        "scheduler_app.tasks.call_webhook", ["http://169.254.169.254/latest/meta-data/"], max_attempts=1
    )
    call_command("rundispatcher", "--burst")
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed"
    error = job.errors[-1]
    assert error["exception_class"] == "scheduler_app.webhooks.WebhookRefused"
    assert error["message"] == (
        "Refused to call '169.254.169.254': it is a link-local address. "
        "Add the host name to SCHEDULER['WEBHOOK_ALLOWED_HOSTS'] to allow it."
    )


def webhook_jobs(*urls):
    jobs = [
        lifecycle.enqueue("scheduler_app.tasks.call_webhook", [url], {"method": "GET"}, max_attempts=1)[0]
        for url in urls
    ]
    call_command("rundispatcher", "--burst")
    return [Job.objects.get(pk=job.pk) for job in jobs]


@pytest.mark.django_db(transaction=True)
def test_a_malformed_answer_fails_its_job_and_a_body_of_any_bytes_is_stored(raw_peer):
    """The jam of the issue: a status line with a NUL once made an error no database could store."""
    bad = raw_peer(answer(b"XTTP/1.1 200 OK\x00\r\n\r\n"))
    odd = raw_peer(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n\xff\x00ok\xc3\xa9\x80"))
    listed = {"WEBHOOK_ALLOWED_HOSTS": [f"127.0.0.1:{bad.port}", f"127.0.0.1:{odd.port}"]}
    with override_settings(SCHEDULER=listed):
        failed, succeeded = webhook_jobs(f"{bad.url}/hook", f"{odd.url}/hook")
    assert failed.status == "failed"
    assert failed.errors[-1]["exception_class"] == "scheduler_app.webhooks.WebhookFailed"
    assert (
        failed.errors[-1]["message"]
        == f"GET {bad.url}/hook answered with a malformed status line 'XTTP/1.1 200 OK\\x00'."
    )
    assert succeeded.status == "succeeded"
    assert succeeded.result == {"status": 200, "body": "\ufffd\ufffdok\u00e9\ufffd", "truncated": False}


@pytest.mark.django_db(transaction=True)
def test_a_slow_peer_fails_its_job_at_the_deadline(raw_peer):
    slow = raw_peer(
        lambda peer, conn: (conn.sendall(b"HTTP/1.1 200 OK\r\n"), peer.trickle(conn, b"X: " + b"a" * 240, 0.25))
    )
    started = time.monotonic()
    with override_settings(SCHEDULER={"WEBHOOK_ALLOWED_HOSTS": [f"127.0.0.1:{slow.port}"], "WEBHOOK_TIMEOUT": 1}):
        [job] = webhook_jobs(f"{slow.url}/hook")
    assert time.monotonic() - started < 30  # a hang guard: the peer trickles for a minute
    assert job.status == "failed"
    assert job.errors[-1]["exception_class"] == "scheduler_app.webhooks.WebhookTimeout"
    assert (
        job.errors[-1]["message"]
        == f"GET {slow.url}/hook did not answer within 1 s (gave up while reading the headers)."
    )
