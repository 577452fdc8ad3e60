"""enqueue and purgejobs: good input works, bad input is one line and exit code 2."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests.plumbing import manage_in_process, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_prints_the_new_job_id(capsys):
    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[1, 2]", "--in", "60", "--priority", "5")
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    assert job.args == [1, 2] and job.priority == 5
    assert job.execute_at > timezone.now() + timedelta(seconds=50)


def test_enqueue_with_dependencies_and_a_unique_period(capsys):
    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[1, 2]")
    first = int(capsys.readouterr().out.strip())
    call_command(
        "enqueue",
        "tests.testapp.tasks.add",
        "--args",
        "[3, 4]",
        "--depends-on",
        str(first),
        "--on-dependency-failure",
        "run",
        "--unique-for",
        "60",
    )
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    assert (job.status, job.on_dependency_failure, job.has_dependencies) == ("waiting", "run", True)
    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[3, 4]", "--unique-for", "60")
    out = capsys.readouterr()
    assert int(out.out.strip()) == job.pk and "holds unique key" in out.err


def test_enqueue_with_pass_results(capsys):
    from scheduler_app.testing import drain

    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[1, 2]")
    first = int(capsys.readouterr().out.strip())
    call_command("enqueue", "tests.testapp.tasks.add", "--args", "[10]", "--depends-on", str(first), "--pass-results")
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    drain()
    job.refresh_from_db()
    assert (job.pass_results, job.args, job.result) == (True, [3, 10], 13)


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope.task"], "not a registered task"),
        (["tests.testapp.tasks.add", "--args", "{"], "Not valid JSON"),
        (["tests.testapp.tasks.add", "--args", "{}"], "Must be a JSON list of positional arguments."),
        (["tests.testapp.tasks.add", "--kwargs", "[]"], "Must be a JSON object of keyword arguments."),
        (["tests.testapp.tasks.add", "--at", "2026-01-01T10:00:00"], "Must carry a time zone offset"),
        (["tests.testapp.tasks.add", "--at", "tomorrow"], "Must be an ISO 8601 date and time"),
        (
            ["tests.testapp.tasks.add", "--in", "-5"],
            "Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m.",
        ),
        (["tests.testapp.tasks.add", "--priority", "500"], "Must be a whole number from -100 to 100."),
        (["tests.testapp.tasks.add", "--queue", "nope"], "Unknown queue"),
        (["tests.testapp.tasks.add", "--at", "2026-01-01T10:00:00+00:00", "--in", "5"], "not allowed with"),
        # Past the end of time: the rules refuse them (no OverflowError, no row in year 10000).
        (
            ["tests.testapp.tasks.add", "--in", "1e20"],
            "Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m.",
        ),
        (
            ["tests.testapp.tasks.add", "--in", "nan"],
            "Must be a number of seconds from 0 to 3153600000, or a duration such as 90s, 2h, 3d or 1h30m.",
        ),
        (
            ["tests.testapp.tasks.add", "--at", "9999-12-31T23:59:59-01:00"],
            "Must be no later than 9999-12-30T23:59:59Z.",
        ),
        # Year 10000 in Asia/Tokyo: refused, so that every zone can show every job.
        (["tests.testapp.tasks.add", "--at", "9999-12-31T00:00:00Z"], "Must be no later than 9999-12-30T23:59:59Z."),
        (["tests.testapp.tasks.add", "--queue", "a/b"], "Unknown queue: queue names are 1 to 64 letters"),
        (
            ["tests.testapp.tasks.add", "--args", "[1, 2]", "--depends-on", "1,x"],
            "Must be a list of at most 1000 job ids.",
        ),
        (
            ["tests.testapp.tasks.add", "--args", "[1, 2]", "--depends-on", "999999"],
            "depends_on: No job has the id 999999.",
        ),
    ],
)
def test_enqueue_bad_input(args, message):
    code, _, stderr = manage_in_process("enqueue", *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr  # no usage text
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


DURATION = "Must be a duration from 0 to 365000 days"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--older-than", "soon"], DURATION),
        (["--older-than=-5s"], DURATION),
        (["--older-than", "99999999999d"], DURATION),  # more than a timedelta holds
        (["--older-than", "999999d"], DURATION),  # a cutoff before year 1
        (["--older-than", "1e20"], DURATION),
        (["--older-than", "nan"], DURATION),
        (["--batch-size", "99999999999999999999999"], "Must be a whole number from 1 to 100000."),
        (["--status", "pending"], "invalid status 'pending'"),
        (["--status", "bogus"], "invalid status 'bogus'"),
    ],
)
def test_purgejobs_bad_input(args, message):
    code, _, stderr = manage_in_process("purgejobs", *args)
    assert code == 2 and "Traceback" not in stderr
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


@pytest.mark.parametrize(
    "text, seconds",
    [("7d", 7 * 86400), ("12h", 43200), ("30m", 1800), ("90s", 90), ("3600", 3600), ("2w", 14 * 86400), ("0s", 0)],
)
def test_purgejobs_durations_keep_the_documented_syntax(text, seconds):
    from scheduler_app.management import arguments
    from scheduler_app.validation.settings import RETENTION_AGE

    assert arguments.rule(RETENTION_AGE)(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--horizon", "1e308"], "argument --horizon: Must be a number of seconds from 0.001 to"),
        (["--lease", "nan"], "argument --lease: Must be a number of seconds from 0.001 to 86400."),
        (["--lease", "0"], "argument --lease: Must be a number of seconds from 0.001 to 86400."),
        (["--lease", "5e-324"], "argument --lease: Must be a number of seconds from 0.001 to 86400."),
        (["--poll-interval", "inf"], "argument --poll-interval: Must be a number of seconds"),
        (["--grace", "-1"], "argument --grace: Must be a number of seconds from 0 to 86400."),
        (["--concurrency", "99999999999"], "argument --concurrency: Must be a whole number from 1 to 1024."),
        (["--max-jobs", "0"], "argument --max-jobs: Must be a whole number from 1 to"),
        (["--queue", "default:99999999999"], "argument --queue: Must be a whole number from 1 to 1024."),
        (["--queue", "a/b"], "argument --queue: Unknown queue: queue names are"),
        (["--queue", "nope"], "argument --queue: Unknown queue 'nope'."),
        (["--queue", "default", "--queue", "default"], "queue 'default' given twice"),
        (["--queue", "default:5:fibers"], "argument --queue: unknown mode 'fibers'; use thread, process or async"),
        (["--queue", "default:5:"], "argument --queue: use NAME, NAME:CONCURRENCY or NAME:CONCURRENCY:MODE"),
    ],
)
def test_rundispatcher_bad_input(args, message):
    code, _, stderr = manage_in_process("rundispatcher", "--burst", *args)
    assert code == 2 and "Traceback" not in stderr
    assert message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


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
