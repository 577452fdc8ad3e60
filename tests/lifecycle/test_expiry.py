"""Expiry: the claims refuse an expired job, the sweep ends it cancelled with its dependents, every entry point sets it."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.models import Job
from tests import plumbing
from tests.plumbing import claim_limited, manage_in_process

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
KEYED = "tests.testapp.tasks.keyed_span"


def claim(queues=("default", "slow"), now=None, limit=10):
    return plumbing.claim("w", queues=list(queues), limit=limit, lease=30, now=now)


def test_expires_in_and_expires_at_set_the_time_and_options_give_a_default():
    now = timezone.now()
    assert lifecycle.enqueue(ADD, [1, 2], expires_in="2h", now=now)[0].expires_at == now + timedelta(hours=2)
    assert lifecycle.enqueue(ADD, [1, 2], expires_in=90, now=now)[0].expires_at == now + timedelta(seconds=90)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert lifecycle.enqueue(ADD, [1, 2], expires_at=at)[0].expires_at == at
    assert lifecycle.enqueue(KEYED, ["/tmp", 1], now=now)[0].expires_at == now + timedelta(hours=1)
    assert lifecycle.enqueue(KEYED, ["/tmp", 1], expires_at=at)[0].expires_at == at
    assert lifecycle.enqueue(ADD, [1, 2])[0].expires_at is None


@pytest.mark.parametrize("limited", [False, True])
def test_no_claim_starts_an_expired_job(limited):
    if limited:
        lifecycle.set_limits("slow", concurrency_limit=5)
    job = lifecycle.enqueue(ADD, [1, 2], queue="slow", expires_in=5)[0]
    late = timezone.now() + timedelta(seconds=6)
    if limited:
        assert claim_limited("w", queues=["slow"], limit=5, lease=30, now=late)[0] == []
    else:
        assert claim(now=late) == []
        assert claim(now=late, limit=1) == []
    assert Job.objects.get(pk=job.pk).status == "pending"
    early = timezone.now() + timedelta(seconds=4)
    if limited:
        assert [j.id for j in claim_limited("w", queues=["slow"], limit=5, lease=30, now=early)[0]] == [job.pk]
    else:
        assert [j.id for j in claim(now=early)] == [job.pk]


def test_the_sweep_cancels_expired_jobs_and_their_dependents():
    parent = lifecycle.enqueue(ADD, [1, 2], expires_at=datetime(2030, 1, 1, 9, 30, tzinfo=UTC))[0]
    child = lifecycle.enqueue(ADD, [3, 4], depends_on=[parent.pk])[0]
    runs_anyway = lifecycle.enqueue(ADD, [3, 4], depends_on=[parent.pk], on_dependency_failure="run")[0]
    waiting = lifecycle.enqueue(ADD, [5, 6], depends_on=[child.pk], expires_at=datetime(2030, 1, 1, 9, tzinfo=UTC))[0]
    fresh = lifecycle.enqueue(ADD, [7, 8], expires_at=datetime(2030, 1, 1, 10, 31, tzinfo=UTC))[0]
    assert lifecycle.expire_due(now=datetime(2030, 1, 1, 8, 59, tzinfo=UTC)) == 0
    sweep_at = datetime(2030, 1, 1, 9, 31, tzinfo=UTC)
    assert lifecycle.expire_due(now=sweep_at) == 2  # parent, and waiting (expired on its own)
    parent.refresh_from_db()
    assert parent.status == "cancelled" and parent.finished_at == sweep_at
    assert parent.errors[-1]["message"] == "Expired: not started by 2030-01-01T09:30:00Z"
    assert parent.errors[-1]["exception_class"] == "Expired"
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert statuses[child.pk] == "cancelled"
    assert statuses[runs_anyway.pk] == "pending"
    assert statuses[waiting.pk] == "cancelled"
    assert statuses[fresh.pk] == "pending"
    assert lifecycle.expire_due(now=sweep_at) == 0


def test_the_sweep_leaves_running_and_finished_jobs_alone():
    running = lifecycle.enqueue(ADD, [1, 2], expires_in=1)[0]
    [claimed] = claim()
    assert claimed.id == running.pk
    assert lifecycle.expire_due(now=timezone.now() + timedelta(seconds=5)) == 0
    assert Job.objects.get(pk=running.pk).status == "running"


def test_the_command_takes_an_expiry(capsys):
    call_command("enqueue", ADD, "--args", "[1, 2]", "--expires-in", "2h")
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    assert timezone.now() + timedelta(minutes=119) < job.expires_at <= timezone.now() + timedelta(hours=2)
    call_command("enqueue", ADD, "--args", "[1, 2]", "--concurrency-key", "k", "--concurrency-limit", "3")
    job = Job.objects.get(pk=int(capsys.readouterr().out.strip()))
    assert (job.concurrency_key, job.concurrency_limit) == ("k", 3)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--expires-in", "soon"], "argument --expires-in: Must be a number of seconds"),
        (["--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"], "not allowed with argument"),
        (["--expires-at", "2030-01-01T00:00:00"], "time zone"),
        (["--concurrency-limit", "0"], "from 1 to"),
    ],
)
def test_the_commands_bad_expiry_is_one_line_and_exit_2(args, message):
    code, _, stderr = manage_in_process("enqueue", ADD, "--args", "[1, 2]", *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not Job.objects.exists()
