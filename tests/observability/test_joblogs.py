"""Per-job logs: a job's own records are kept with its attempt, bounded, written with the outcome."""

import logging

import pytest
from django.test import override_settings

from scheduler_app import lifecycle
from scheduler_app.models import Job, JobLog
from scheduler_app.observability import joblogs
from tests.plumbing import dispatcher_thread, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T = "tests.testapp.tasks."


def run(*jobs, **options):
    with dispatcher_thread(**options):
        assert wait_for(
            lambda: not Job.objects.filter(pk__in=[j.pk for j in jobs], status__in=["pending", "running"]).exists()
        )


def enqueue(name, *args, **kw):
    return lifecycle.enqueue(T + name, list(args), kw.pop("kwargs", {}), **kw)[0]


def test_records_of_the_jobs_own_thread_are_kept_with_each_attempt():
    ok = enqueue("chatty", 3)
    bad = enqueue("chatty", 1, True, max_attempts=2)
    run(ok, bad)
    rows = list(
        JobLog.objects.filter(job=ok).order_by("attempt", "seq").values_list("attempt", "level", "logger", "message")
    )
    assert rows == [(1, logging.INFO, "tests.testapp.tasks", f"line {i} of 3") for i in (1, 2, 3)]
    assert Job.objects.get(pk=ok.pk).logs_count == 3
    bad_rows = list(JobLog.objects.filter(job=bad).order_by("attempt", "seq"))
    assert [r.attempt for r in bad_rows] == [1, 1, 2, 2]
    assert bad_rows[1].level == logging.ERROR and bad_rows[1].message == "could not find it"
    assert "KeyError: 'missing'" in bad_rows[1].exc_text
    assert Job.objects.get(pk=bad.pk).logs_count == 4


def test_async_tasks_logs_are_kept():
    job = enqueue("async_chatty")
    run(job)
    assert list(JobLog.objects.filter(job=job).values_list("message", flat=True)) == ["from an async task"]


@override_settings(SCHEDULER={"JOB_LOG_MAX_RECORDS": 5, "JOB_LOG_LEVEL": "DEBUG"})
def test_past_the_bound_one_line_says_how_many_were_dropped():
    job = enqueue("chatty", 20)
    run(job)
    messages = list(JobLog.objects.filter(job=job).order_by("attempt", "seq").values_list("message", flat=True))
    assert messages[0] == "debug is below the default level"  # DEBUG asked for
    assert len(messages) == 6
    assert messages[-1].startswith("16 more records dropped")


@override_settings(SCHEDULER={"JOB_LOG_MAX_BYTES": 100})
def test_the_byte_bound_counts_too():
    job = enqueue("chatty", 20)
    run(job)
    messages = list(JobLog.objects.filter(job=job).order_by("attempt", "seq").values_list("message", flat=True))
    assert messages[-1].startswith(f"{20 - (len(messages) - 1)} more records dropped")
    assert sum(len(m) for m in messages[:-1]) <= 100


@override_settings(SCHEDULER={"JOB_LOG_MAX_RECORDS": 0})
def test_zero_keeps_nothing():
    job = enqueue("chatty", 2)
    run(job)
    assert not JobLog.objects.filter(job=job).exists() and Job.objects.get(pk=job.pk).logs_count == 0


def test_retention_removes_logs_with_their_job():
    job = enqueue("chatty", 2)
    run(job)
    assert JobLog.objects.filter(job=job).count() == 2
    Job.objects.filter(pk=job.pk).delete()
    assert not JobLog.objects.exists()


def test_a_record_is_counted_in_the_bytes_it_takes_not_its_characters():
    capture = joblogs.Capture(0, 100, 1000)
    record = logging.LogRecord("t", logging.INFO, "", 0, "\U0001f600" * 300, None, None)  # 300 characters, 1,200 bytes
    capture.add(record)
    assert capture.records == [] and capture.dropped == 1
    capture.add(logging.LogRecord("t", logging.INFO, "", 0, "\U0001f600" * 200, None, None))  # 800 bytes
    assert len(capture.records) == 1 and capture.size == 801


def test_own_loggers_are_not_kept():
    assert joblogs.is_own("scheduler_app.dispatcher.runner") and joblogs.is_own("django.tasks")
    assert not joblogs.is_own("scheduler_app.tasks") and not joblogs.is_own("scheduler_app.demo.tasks")
    assert not joblogs.is_own("scheduler_apps") and not joblogs.is_own("myapp")


def test_records_of_loggers_that_do_not_propagate_are_kept_too():
    job = enqueue("isolated_logger")
    run(job)
    assert list(JobLog.objects.filter(job=job).values_list("logger", "message")) == [
        ("tests.isolated", "kept although it never reaches the root logger")
    ]
