"""The schedules service: create/update validation, materialisation, misfire policies, disabling."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.utils import timezone

from scheduler_app import schedules, signals
from scheduler_app.models import Job, Schedule
from scheduler_app.schedules import dispatch

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def make(now=T0, **fields):
    spec = {"name": "s", "task": ADD, "args": [1, 2], "cron": "* * * * *"}
    spec.update(fields)
    if "interval_seconds" in fields:
        spec.pop("cron")
    return schedules.create(now=now, **spec)


def jobs_of(schedule):
    return list(Job.objects.filter(schedule=schedule).order_by("execute_at"))


def test_create_fills_defaults_from_the_task_and_plans_the_first_run():
    s = make(cron="0 2 * * 1-5", timezone="Europe/Berlin")
    assert (s.queue, s.priority, s.max_attempts) == ("default", 0, 3)
    assert s.next_run_at == datetime(2030, 1, 2, 1, 0, tzinfo=UTC)  # Wed 02:00 CET
    assert s.enabled and s.last_run_at is None


def test_create_validation_errors_by_field():
    with pytest.raises(ValidationError) as info:
        schedules.create(name="", task="os.system", cron="61 * * * *", timezone="Mars/Base", misfire_policy="never")
    errors = info.value.message_dict
    assert set(errors) >= {"name", "task", "cron", "timezone", "misfire_policy"}
    with pytest.raises(ValidationError) as info:
        schedules.create(name="x", task=ADD, args=[1, 2], cron="* * * * *", interval_seconds=5)
    assert "not both" in info.value.message_dict["non_field_errors"][0]
    with pytest.raises(ValidationError) as info:
        schedules.create(name="x", task=ADD, args=[1, 2])
    assert "non_field_errors" in info.value.message_dict
    with pytest.raises(ValidationError) as info:
        schedules.create(name="x", task=ADD, args=[1, 2], interval_seconds=0)
    assert "interval_seconds" in info.value.message_dict
    make(name="dup")
    with pytest.raises(ValidationError) as info:
        make(name="dup")
    assert "already exists" in info.value.message_dict["name"][0]


def test_due_schedule_materialises_one_job_with_its_run_time():
    s = make(interval_seconds=60)
    due = s.next_run_at
    assert schedules.materialize_due(due - timedelta(seconds=1)) == []
    result = schedules.materialize_due(due + timedelta(seconds=0.2))
    assert result == [(s.pk, (due + timedelta(seconds=60)).timestamp())]
    [job] = jobs_of(s)
    assert job.execute_at == due and job.unique_key == f"schedule:{s.pk}:{due.isoformat()}"
    assert (job.task, job.args, job.status) == (ADD, [1, 2], "pending")
    s.refresh_from_db()
    assert s.last_run_at == due and s.last_job == job and s.next_run_at == due + timedelta(seconds=60)
    # Nothing more until the next run time.
    assert schedules.materialize_due(due + timedelta(seconds=30)) == []
    assert len(jobs_of(s)) == 1


def test_compare_and_set_lets_only_one_caller_win():
    s = make(interval_seconds=60)
    due = s.next_run_at
    stale = Schedule.objects.get(pk=s.pk)  # what a second dispatcher read
    schedules.materialize_due(due)
    assert dispatch._materialize_one(stale, due, "default") is False
    assert len(jobs_of(s)) == 1
    # A dispatcher whose heap entry is stale learns the current next run.
    assert schedules.materialize_due(due, ids=[s.pk]) == [(s.pk, (due + timedelta(seconds=60)).timestamp())]


@pytest.mark.parametrize("policy, expected", [("run_once", 1), ("skip", 0), ("catch_up", 10)])
def test_misfire_after_a_one_hour_outage(policy, expected):
    s = make(misfire_policy=policy)  # every minute
    first_due = s.next_run_at
    now = first_due + timedelta(hours=1, seconds=20)
    [(sid, next_epoch)] = schedules.materialize_due(now)
    assert next_epoch == (first_due + timedelta(minutes=61)).timestamp()
    jobs = jobs_of(s)
    assert len(jobs) == expected
    if policy == "run_once":
        assert jobs[0].execute_at == first_due
    if policy == "catch_up":
        assert [j.execute_at for j in jobs] == [first_due + timedelta(minutes=m) for m in range(51, 61)]
    # One outage, one decision: nothing else is due now.
    assert schedules.materialize_due(now) == []
    assert len(jobs_of(s)) == expected


def test_catch_up_is_bounded_by_the_setting(settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "SCHEDULE_CATCH_UP_MAX": 3}
    s = make(misfire_policy="catch_up")
    schedules.materialize_due(s.next_run_at + timedelta(hours=1, seconds=20))
    assert len(jobs_of(s)) == 3


@pytest.mark.parametrize("late", [2.7, 29, 31])
def test_catch_up_creates_every_missed_run_even_within_the_grace_period(late):
    """An interval shorter than SCHEDULE_MISFIRE_GRACE (30 s): 2.7 s late is 3 runs, 29 s is 10 (the cap)."""
    s = make(interval_seconds=1, misfire_policy="catch_up")
    due = s.next_run_at
    schedules.materialize_due(due + timedelta(seconds=late))
    expected = min(int(late) + 1, 10)
    runs = [j.execute_at for j in jobs_of(s)]
    assert len(runs) == expected
    last = due + timedelta(seconds=int(late))
    assert runs == [last - timedelta(seconds=k) for k in reversed(range(expected))]


def test_skip_still_runs_a_schedule_that_is_only_a_little_late():
    s = make(misfire_policy="skip")
    schedules.materialize_due(s.next_run_at + timedelta(seconds=2))
    assert len(jobs_of(s)) == 1


def test_disabling_stops_it_and_enabling_starts_from_now():
    s = make(interval_seconds=60)
    s = schedules.disable(s.pk, now=T0)
    assert s.next_run_at is None and not s.enabled
    assert schedules.materialize_due(T0 + timedelta(hours=2)) == []
    assert jobs_of(s) == []
    later = T0 + timedelta(hours=2)
    s = schedules.enable(s.pk, now=later)
    assert s.next_run_at == later + timedelta(seconds=60)  # no catch-up of the disabled time
    schedules.materialize_due(later + timedelta(seconds=61))
    assert len(jobs_of(s)) == 1


def test_a_schedule_disabled_between_read_and_update_makes_no_job():
    s = make(interval_seconds=60)
    read = Schedule.objects.get(pk=s.pk)
    schedules.disable(s.pk)
    assert dispatch._materialize_one(read, read.next_run_at, "default") is False
    assert jobs_of(s) == []


def test_update_recomputes_next_run_only_for_timing_changes():
    s = make(cron="0 3 * * *")
    s2 = schedules.update(s.pk, priority=5, now=T0 + timedelta(hours=1))
    assert s2.next_run_at == s.next_run_at and s2.priority == 5
    s3 = schedules.update(s.pk, cron="0 4 * * *", now=T0)
    assert s3.next_run_at == datetime(2030, 1, 2, 4, 0, tzinfo=UTC)
    with pytest.raises(ValidationError):
        schedules.update(s.pk, timezone="Nowhere/Land")


def test_end_at_ends_the_schedule():
    s = make(interval_seconds=60, end_at=T0 + timedelta(seconds=90))
    schedules.materialize_due(T0 + timedelta(seconds=60))
    s.refresh_from_db()
    assert s.next_run_at is None and s.enabled and len(jobs_of(s)) == 1


def test_an_unregistered_task_skips_the_run_without_breaking_the_dispatcher():
    s = make(interval_seconds=60)
    Schedule.objects.filter(pk=s.pk).update(task="tests.testapp.tasks.gone")
    assert schedules.materialize_due(T0 + timedelta(seconds=61)) == [(s.pk, (T0 + timedelta(seconds=120)).timestamp())]
    assert jobs_of(s) == []


def test_run_now_enqueues_one_job_and_keeps_the_timetable():
    s = make(interval_seconds=3600)
    job = schedules.run_now(s.pk)
    assert job.schedule_id == s.pk and job.status == "pending" and job.execute_at <= timezone.now()
    s2 = Schedule.objects.get(pk=s.pk)
    assert s2.next_run_at == s.next_run_at and s2.last_job == job


def test_changes_are_announced_with_the_next_run(django_capture_on_commit_callbacks):
    payloads = []

    def receiver(sender, message, **kwargs):
        payloads.append(message.to_dict())

    signals.jobs_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            s = make(interval_seconds=60)
        with django_capture_on_commit_callbacks(execute=True):
            schedules.disable(s.pk)
        with django_capture_on_commit_callbacks(execute=True):
            schedules.delete(s.pk)
    finally:
        signals.jobs_changed.disconnect(receiver)
    assert [p["schedules"] for p in payloads] == [
        [[s.pk, (T0 + timedelta(seconds=60)).timestamp()]],
        [[s.pk, None]],
        [[s.pk, None]],
    ]


def test_window_and_changes_for_the_dispatcher():
    a = make(name="a", interval_seconds=60)
    b = make(name="b", interval_seconds=7200)
    c = make(name="c", interval_seconds=60)
    schedules.disable(c.pk, now=T0)
    assert schedules.window((T0 + timedelta(minutes=5)).timestamp()) == [
        (a.pk, (T0 + timedelta(seconds=60)).timestamp())
    ]
    entries = schedules.changes((T0 - timedelta(seconds=1)).timestamp())
    assert dict(entries) == {a.pk: a.next_run_at.timestamp(), b.pk: b.next_run_at.timestamp(), c.pk: None}


def test_deleting_keeps_the_jobs():
    s = make(interval_seconds=60)
    schedules.materialize_due(T0 + timedelta(seconds=60))
    schedules.delete(s.pk)
    assert Job.objects.filter(schedule__isnull=True).aggregate(n=Count("id"))["n"] == 1
    with pytest.raises(Schedule.DoesNotExist):
        schedules.delete(s.pk)


def test_a_row_with_a_broken_cron_is_stopped_not_fatal():
    s = make()
    Schedule.objects.filter(pk=s.pk).update(cron="99 * * * *")
    assert schedules.materialize_due(s.next_run_at) == [(s.pk, None)]
    assert jobs_of(s) == []
