"""Queue limits in the service: rows seeded from settings, changes checked by the rules, claims that obey them."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.checks import check_settings
from scheduler_app.models import Job, Queue, QueueStart
from scheduler_app.sql.limited import RATE_START_KEEP
from scheduler_app.vocabulary.jobs import Outcome
from tests import plumbing
from tests.plumbing import claim

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"


def add_jobs(n, queue="slow", **spec):
    return [lifecycle.enqueue(ADD, [i, i], queue=queue, **spec)[0] for i in range(n)]


def claim_limited(queues=("slow", "default"), limit=4, worker="w", now=None, finished=()):
    return plumbing.claim_limited(worker, queues=list(queues), limit=limit, lease=30, now=now, finished=finished)


@override_settings(SCHEDULER={"QUEUES": {"slow": {"concurrency_limit": 2, "rate_limit": 5, "rate_period": 60}}})
def test_settings_seed_a_queue_row_once_and_the_row_wins_after():
    lifecycle.ensure_queues(["slow", "default"])
    slow = Queue.objects.get(name="slow")
    assert (slow.concurrency_limit, slow.rate_limit, slow.rate_period) == (2, 5, 60.0)
    assert not Queue.objects.get(name="default").limited
    lifecycle.set_limits("slow", concurrency_limit=None)
    lifecycle.ensure_queues(["slow"])
    assert Queue.objects.get(name="slow").concurrency_limit is None
    assert lifecycle.limited_queues() == {"slow"}


def test_limits_are_checked_by_their_rules():
    with pytest.raises(ValidationError) as caught:
        lifecycle.set_limits("slow", concurrency_limit=0, rate_limit="x", rate_period=-1)
    assert caught.value.message_dict == {
        "concurrency_limit": ["Must be a whole number from 1 to 100000."],
        "rate_limit": ["Must be a whole number from 1 to 10000."],
        "rate_period": ["Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m."],
    }
    with pytest.raises(ValidationError):
        lifecycle.set_limits("nope", concurrency_limit=1)
    with pytest.raises(ValidationError) as caught:
        lifecycle.set_limits("slow", rate_period=None)
    assert "rate_period" in caught.value.message_dict
    assert not Queue.objects.filter(name="slow").exists()


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ({"bad name": {}}, "'bad name' is not a queue name (1 to 64 letters, digits, '_', '.' or '-')."),
        ({"slow": {"concurrency_limit": 0}}, "slow: concurrency_limit: Must be a whole number from 1 to 100000."),
        (
            {"slow": {"rate_period": 5e-324}},
            "slow: rate_period: Must be a number of seconds from 0.001 to 86400, or a duration such as 90s, 2h, 3d or 1h30m.",
        ),
        ({"slow": {"mode": "fork"}}, 'slow: mode: Must be "thread", "process" or "async".'),
        (
            {"slow": {"burst": 3}},
            "slow: unknown key 'burst'; the keys are concurrency_limit, rate_limit, rate_period and mode.",
        ),
        (
            {"slow": 5},
            "slow: Must be a dict of queue names to dicts of concurrency_limit, rate_limit, rate_period and mode.",
        ),
        ([], "Must be a dict of queue names to dicts of concurrency_limit, rate_limit, rate_period and mode."),
    ],
)
def test_bad_queue_settings_are_a_system_check_error(queues, message):
    with override_settings(SCHEDULER={"QUEUES": queues}):
        [error] = [e for e in check_settings() if e.id == "scheduler_app.E011"]
    assert error.msg == f"SCHEDULER['QUEUES']: {message}"


@override_settings(
    SCHEDULER={"QUEUES": {"slow": {"mode": "process"}, "default": {"mode": "thread"}, "other": {"mode": "async"}}}
)
def test_every_mode_is_a_valid_setting():
    assert check_settings() == []


def test_the_plain_claim_never_takes_jobs_of_a_limited_queue():
    lifecycle.set_limits("slow", concurrency_limit=10)
    add_jobs(2)
    other = add_jobs(1, queue="default")
    claimed = claim("w", queues=["slow", "default"], limit=4, lease=30)
    assert [j.id for j in claimed] == [other[0].pk]
    # drain (limits=False) ignores limits, as it ignores pauses.
    assert len(claim("d", queues=["slow"], limit=4, lease=30, limits=False)) == 2


def test_a_concurrency_limit_caps_the_claim_and_finishes_free_room():
    lifecycle.set_limits("slow", concurrency_limit=2)
    jobs = add_jobs(5)
    other = add_jobs(3, queue="default", priority=-1)
    first, full = claim_limited(limit=4)
    # Priority order across queues, at most 2 of the limited one.
    assert [j.id for j in first] == [jobs[0].pk, jobs[1].pk, other[0].pk, other[1].pk]
    assert full == {"slow": None}
    second, full = claim_limited(worker="x")
    assert [j.id for j in second] == [other[2].pk] and full == {"slow": None}
    # The outcome recorded with the claim frees its slot in the same statement.
    done = Outcome(first[0].id, "w", 1, "succeeded", result_json="2")
    third, full = claim_limited(limit=4, finished=[done])
    assert [j.id for j in third] == [jobs[2].pk] and full == {"slow": None}
    assert Job.objects.filter(queue="slow", status="running").count() == 2


def test_a_rescue_frees_room_and_a_timed_out_attempt_no_longer_counts():
    lifecycle.set_limits("slow", concurrency_limit=1)
    jobs = add_jobs(3)
    [claimed], _ = claim_limited(worker="dead")
    assert claim_limited(worker="alive")[0] == []
    lifecycle.rescue_expired(now=timezone.now() + timedelta(seconds=60))
    [again], _ = claim_limited(worker="alive")
    # A timeout is an outcome like any other: the attempt ends, its room frees.
    lifecycle.finish([Outcome(again.id, "alive", again.attempt, "failed", error={"m": "timed out"})])
    [third], full = claim_limited(worker="alive")
    assert {claimed.id, again.id, third.id} <= {j.pk for j in jobs} and full == {"slow": None}


def test_a_rate_limit_is_a_sliding_window_of_starts():
    lifecycle.set_limits("slow", rate_limit=3, rate_period=10)
    add_jobs(8)
    now = timezone.now()
    first, full = claim_limited(limit=2, now=now)
    assert len(first) == 2 and full == {}
    second, full = claim_limited(limit=4, now=now + timedelta(seconds=4))
    assert len(second) == 1
    # Full until the first two starts leave the window, 10 s after them.
    assert full == {"slow": pytest.approx((now + timedelta(seconds=10)).timestamp(), abs=1e-3)}
    assert claim_limited(now=now + timedelta(seconds=9.9))[0] == []
    third, _ = claim_limited(now=now + timedelta(seconds=10.01))
    assert len(third) == 2
    # Starts that left the window are deleted by the claims themselves, a minute after.
    assert QueueStart.objects.filter(queue="slow").count() == 5
    later = now + timedelta(seconds=10 + RATE_START_KEEP + 0.01)
    assert len(claim_limited(limit=1, now=later)[0]) == 1
    assert QueueStart.objects.filter(queue="slow").count() == 4  # the first two gone, one more


def test_a_claim_that_commits_after_a_later_one_still_counts_its_own_window():
    """A claim's time is read before it waits for its turn: one may commit after a claim
    of a later time. Its window's starts must still be there. Four dispatchers of 4 slots
    once started 11 jobs within a second of a 10-per-second queue: a later claim had
    deleted the starts of the window it had left (and took only 4), the stale one then
    counted 6 and took 4 more."""
    lifecycle.set_limits("slow", rate_limit=10, rate_period=1)
    add_jobs(30)
    t = timezone.now() + timedelta(seconds=1)  # after the jobs' execute_at
    assert len(claim_limited(limit=8, now=t)[0]) == 8
    assert len(claim_limited(limit=2, now=t + timedelta(seconds=0.9))[0]) == 2  # 10 in (t - 1, t + 0.9]
    assert len(claim_limited(limit=4, now=t + timedelta(seconds=1.06))[0]) == 4  # the first 8 left its window
    # Read its time at t + 0.97, committed now: its window (t - 0.03, t + 0.97] holds 10 starts.
    stale, full = claim_limited(limit=4, now=t + timedelta(seconds=0.97))
    assert stale == [] and "slow" in full
    starts = sorted(Job.objects.filter(started_at__isnull=False).values_list("started_at", flat=True))
    assert max(sum(1 for b in starts if a <= b < a + timedelta(seconds=1)) for a in starts) == 10


@pytest.mark.parametrize("age", [0.9996, 0.99951, 0.999999])
def test_a_start_in_the_last_millisecond_of_its_window_still_counts(age):
    """SQLite's strftime rounds to the millisecond: a start 0.9996 s old once left a 1 s window early."""
    lifecycle.set_limits("slow", rate_limit=1, rate_period=1)
    add_jobs(3)
    now = timezone.now().replace(microsecond=542691) + timedelta(seconds=1)  # after the jobs' execute_at
    [first], _ = claim_limited(limit=1, now=now)
    later = now + timedelta(seconds=age)
    assert claim_limited(now=later) == ([], {"slow": pytest.approx((now + timedelta(seconds=1)).timestamp(), abs=2e-3)})
    assert QueueStart.objects.filter(queue="slow").count() == 1  # not deleted before it left its window
    [second], _ = claim_limited(limit=1, now=now + timedelta(seconds=1.002))
    assert second.id != first.id


def test_a_paused_limited_queue_is_not_claimed():
    lifecycle.set_limits("slow", concurrency_limit=3)
    add_jobs(2)
    lifecycle.pause_queue("slow")
    assert claim_limited() == ([], {})
    lifecycle.resume_queue("slow")
    assert len(claim_limited()[0]) == 2


@pytest.mark.postgres_only
def test_postgresql_has_the_per_queue_claim_index_and_sqlite_does_not_need_it():
    """Made by migration 0008 on PostgreSQL only (SQLite would pay for it at every claim)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'job_pending_queue_claim_idx'")
        [(definition,)] = cursor.fetchall()
    assert "(queue, priority DESC, execute_at, id) WHERE ((status)::text = 'pending'::text)" in definition
