"""enqueue and purgejobs: good input works, bad input is one line and exit code 2."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job

from .helpers import manage_in_process, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_prints_the_new_job_id(capsys):
    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[1, 2]", "--in", "60", "--priority", "5")
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    assert job.args == [1, 2] and job.priority == 5
    assert job.execute_at > timezone.now() + timedelta(seconds=50)


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.task"], "not a registered task"),
        (["tests.testapp.tasks.add", "--args", "{"], "invalid JSON"),
        (["tests.testapp.tasks.add", "--args", "{}"], "expected a JSON list"),
        (["tests.testapp.tasks.add", "--kwargs", "[]"], "expected a JSON object"),
        (["tests.testapp.tasks.add", "--at", "2026-01-01T10:00:00"], "needs a UTC offset"),
        (["tests.testapp.tasks.add", "--at", "tomorrow"], "invalid ISO 8601"),
        (["tests.testapp.tasks.add", "--in", "-5"], "seconds must be >= 0"),
        (["tests.testapp.tasks.add", "--priority", "500"], "between -100 and 100"),
        (["tests.testapp.tasks.add", "--queue", "nope"], "Unknown queue"),
        (["tests.testapp.tasks.add", "--at", "2026-01-01T10:00:00+00:00", "--in", "5"], "not allowed with"),
    ],
)
def test_enqueue_bad_input(args, message):
    code, _, stderr = manage_in_process("enqueue", *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr
    assert Job.objects.count() == 0


def test_bad_input_from_a_real_process_is_one_line_and_exit_code_2():
    """The cases above run the command line in-process; one runs it for real."""
    result = run_manage("enqueue", "nope.task", timeout=60)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("CommandError: task: 'nope.task' is not a registered task")
    assert Job.objects.count() == 0


def test_purgejobs_uses_retention_or_older_than(capsys):
    old, _ = lifecycle.enqueue("tests.testapp.tasks.add", [1, 1])
    new, _ = lifecycle.enqueue("tests.testapp.tasks.add", [1, 1])
    pending, _ = lifecycle.enqueue("tests.testapp.tasks.add", [1, 1])
    for job in (old, new):
        lifecycle.cancel(job.pk)
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    call_command("purgejobs", "--dry-run")
    assert "1 finished jobs would be deleted" in capsys.readouterr().out
    call_command("purgejobs")
    assert set(Job.objects.values_list("pk", flat=True)) == {new.pk, pending.pk}
    call_command("purgejobs", "--older-than", "0s", "--status", "cancelled")
    assert set(Job.objects.values_list("pk", flat=True)) == {pending.pk}


@pytest.mark.parametrize("args", [["--older-than", "soon"], ["--status", "pending"], ["--status", "bogus"]])
def test_purgejobs_bad_input(args):
    code, _, stderr = manage_in_process("purgejobs", *args)
    assert code == 2 and stderr and "Traceback" not in stderr


def test_rundispatcher_prints_one_banner_line(capsys):
    from django.db import connection

    call_command("rundispatcher", "--burst", "--queue", "default:3", "--queue", "slow", "--horizon", "120")
    out = capsys.readouterr().out
    (banner,) = [line for line in out.splitlines() if line.startswith("dispatcher ")]
    wakeups = "notify" if connection.vendor == "postgresql" else "data_version every 20ms"
    assert f"| database {connection.vendor} |" in banner
    assert f"| wake-ups {wakeups} (poll every 1s) |" in banner
    assert "| queues default, slow |" in banner and "default:3" in banner
    assert "| horizon 120s | burst" in banner
