"""The Executor: Django's task signals around the call, its log lines, endings past the deadline.

It runs here on the test's thread with a made-up claimed attempt: no
database is needed (the dispatcher tests run it on worker threads).
"""

import logging
import re
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started

from scheduler_app import taskresults
from scheduler_app.backends import SchedulerBackend
from scheduler_app.runtime.executor import Executor
from scheduler_app.vocabulary.jobs import ClaimedJob
from scheduler_app.vocabulary.policy import TIMEOUT_CLASS, RetryPolicy

T = "tests.testapp.tasks."
NOW = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)


def claimed(task, *args, attempt=1, max_attempts=3, errors="[]", **fields):
    values = {
        "id": 5,
        "task": T + task,
        "args": list(args),
        "kwargs": {},
        "queue": "default",
        "priority": 0,
        "execute_at": NOW,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "timeout": None,
        "cancel_requested": False,
        "worker": "w-now",
        "last_attempted_at": NOW + timedelta(minutes=attempt),
        "started_at": NOW + timedelta(minutes=1),
        "enqueued_at": NOW,
        "errors": errors,
    }
    values.update(fields)
    return ClaimedJob(**values)


def run(job, deadline=None):
    # own_connections=False: these tests run the attempt in the test's thread,
    # which holds no connection of its own to recycle (and may not open one).
    return Executor(RetryPolicy(base=2.0, jitter=0.0), own_connections=False)(job, threading.Event(), deadline)


@pytest.fixture
def sent():
    """Record (signal name, status, errors, snapshot) of each task signal, and restore after."""
    calls = []

    def receiver(signal, sender, task_result, **kwargs):
        name = "started" if signal is task_started else "finished"
        calls.append((name, sender, task_result.status, len(task_result.errors), task_result))

    task_started.connect(receiver, dispatch_uid="test-runner")
    task_finished.connect(receiver, dispatch_uid="test-runner")
    yield calls
    task_started.disconnect(dispatch_uid="test-runner")
    task_finished.disconnect(dispatch_uid="test-runner")


def test_success_sends_started_then_finished_with_the_return_value(sent):
    outcome = run(claimed("add", 2, 3))
    assert outcome.status == "succeeded"
    assert [(name, sender, status) for name, sender, status, _, _ in sent] == [
        ("started", SchedulerBackend, TaskResultStatus.RUNNING),
        ("finished", SchedulerBackend, TaskResultStatus.SUCCESSFUL),
    ]
    result, same = sent[0][4], sent[1][4]
    assert result is same and isinstance(result, TaskResult)
    assert result.return_value == 5 and result.finished_at is not None
    assert result.id == "5" and result.backend == "default" and result.args == [2, 3]
    assert result.enqueued_at == NOW and result.worker_ids == ["w-now"] and result.attempts == 1
    assert result.started_at == NOW + timedelta(minutes=1)
    assert result.last_attempted_at == NOW + timedelta(minutes=1)
    assert result.task.run_after is None  # execute_at == enqueued_at: not deferred


def test_a_failed_attempt_that_will_be_retried_is_ready_with_the_new_error(sent):
    earlier = '[{"attempt": 1, "worker": "w-old", "exception_class": "builtins.KeyError", "traceback": "tb1"}]'
    outcome = run(claimed("boom", "kaput", attempt=2, errors=earlier))
    assert outcome.status == "pending"
    started, finished = sent
    assert started[2] == TaskResultStatus.RUNNING and started[3] == 1
    result = finished[4]
    assert finished[2] == TaskResultStatus.READY and not result.is_finished
    assert [e.exception_class_path for e in result.errors] == ["builtins.KeyError", "builtins.ValueError"]
    assert "kaput" in result.errors[-1].traceback
    assert result.worker_ids == ["w-old", "w-now"] and result.attempts == 2
    assert result.finished_at is None
    # As get_result() shows it after this attempt: deferred to the retry.
    assert result.task.run_after == outcome.retry_at
    assert result.started_at == NOW + timedelta(minutes=1)
    assert result.last_attempted_at == NOW + timedelta(minutes=2)


def test_the_last_attempt_that_fails_is_failed(sent):
    run(claimed("boom", attempt=3, max_attempts=3))
    assert [(n, st) for n, _, st, _, _ in sent] == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.FAILED),
    ]
    assert sent[-1][4].finished_at is not None and sent[-1][3] == 1


@pytest.mark.parametrize(("code", "said"), [(3, "sys.exit(3)"), (None, "sys.exit()"), ("bye", "sys.exit('bye')")])
def test_a_task_that_calls_sys_exit_fails_its_attempt_and_says_so(sent, code, said):
    # Not the end of the thread (or of the worker process) that runs it.
    outcome = run(claimed("exits", code, attempt=3, max_attempts=3))
    assert outcome.status == "failed"
    assert outcome.error["exception_class"] == "builtins.SystemExit"
    assert outcome.error["message"] == f"The task called {said}."
    assert "sys.exit(code)" in outcome.error["traceback"]  # the task's own line
    assert [(n, st) for n, _, st, _, _ in sent] == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.FAILED),
    ]


def test_a_receiver_that_raises_does_not_break_the_job(sent, caplog):
    def bad(**kwargs):
        raise RuntimeError("receiver bug")

    task_started.connect(bad, dispatch_uid="test-bad")
    task_finished.connect(bad, dispatch_uid="test-bad")
    try:
        with caplog.at_level(logging.ERROR, logger="scheduler_app.taskresults"):
            outcome = run(claimed("add", 1, 1))
    finally:
        task_started.disconnect(dispatch_uid="test-bad")
        task_finished.disconnect(dispatch_uid="test-bad")
    assert outcome.status == "succeeded" and outcome.result_json == "2"
    assert len(sent) == 2  # the other receivers still ran
    errors = [r for r in caplog.records if r.name == "scheduler_app.taskresults"]
    assert len(errors) == 2 and "receiver bug" in str(errors[0].exc_info[1])
    assert "task_started" in errors[0].getMessage() and "task_finished" in errors[1].getMessage()


def test_no_result_is_built_when_nobody_listens(monkeypatch):
    built = []
    real = taskresults.attempt_result
    monkeypatch.setattr(taskresults, "attempt_result", lambda *a: built.append(a) or real(*a))
    saved = {s: (list(s.receivers), dict(s.sender_receivers_cache)) for s in (task_started, task_finished)}
    try:
        for signal in saved:  # Django's own log receivers included
            signal.receivers.clear()
            signal.sender_receivers_cache.clear()
        assert run(claimed("add", 1, 2)).status == "succeeded"
        assert built == []
        # A task that takes a context gets its TaskResult all the same.
        assert run(claimed("context_info")).status == "succeeded"
        assert len(built) == 1
    finally:
        for signal, (receivers, _cache) in saved.items():
            signal.receivers[:] = receivers
            signal.sender_receivers_cache.clear()


@pytest.fixture
def django_tasks_log_level():
    """Set the django.tasks logger's level for the test (what a project's LOGGING does)."""
    log = logging.getLogger("django.tasks")
    saved = log.level

    def set_level(level):
        log.setLevel(level)
        logging.getLogger().manager._clear_cache()

    yield set_level
    set_level(saved)


def test_no_result_is_built_when_only_djangos_log_receivers_listen_and_their_level_is_off(
    monkeypatch, django_tasks_log_level, caplog
):
    # The default of a project that never configured django.tasks: the root
    # logger's WARNING. Django's receivers would log nothing for a success.
    built = []
    real = taskresults.attempt_result
    monkeypatch.setattr(taskresults, "attempt_result", lambda *a: built.append(a) or real(*a))
    django_tasks_log_level(logging.WARNING)
    assert run(claimed("add", 1, 2)).status == "succeeded"
    assert built == []
    # A failure is logged at ERROR by Django's receiver: that one is still sent, with the traceback.
    with caplog.at_level(logging.WARNING, logger="django.tasks"):
        assert run(claimed("boom", "kaput", attempt=3)).status == "failed"
    [line] = [r for r in caplog.records if r.name == "django.tasks"]
    assert line.levelno == logging.ERROR and "state=FAILED" in line.getMessage() and line.exc_info
    # At INFO, Django's lines are wanted for every job.
    built.clear()
    django_tasks_log_level(logging.INFO)
    assert run(claimed("add", 1, 2)).status == "succeeded"
    assert len(built) == 1


def test_any_other_receiver_gets_every_signal_whatever_the_log_level(sent, django_tasks_log_level):
    django_tasks_log_level(logging.WARNING)
    run(claimed("add", 1, 2))
    assert [name for name, *_ in sent] == ["started", "finished"]


def test_a_success_is_logged_at_debug_and_the_start_too(caplog):
    with caplog.at_level(logging.DEBUG, logger="scheduler_app.dispatcher.runner"):
        run(claimed("add", 1, 2))
    ours = [r for r in caplog.records if r.name == "scheduler_app.dispatcher.runner"]
    assert [(r.levelno, r.getMessage().split(":")[0]) for r in ours] == [
        (logging.DEBUG, "job 5 started"),
        (logging.DEBUG, "job 5 succeeded"),
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scheduler_app.dispatcher.runner"):
        run(claimed("add", 1, 2))
    assert [r for r in caplog.records if r.name == "scheduler_app.dispatcher.runner"] == []


def test_the_context_carries_the_same_result_the_signals_do(sent):
    outcome = run(claimed("context_info", attempt=2))
    assert outcome.status == "succeeded"
    assert '"attempt": 2' in outcome.result_json and '"result_id": "5"' in outcome.result_json


def test_a_retried_attempt_is_logged_as_a_failed_attempt_with_the_retry_time(caplog):
    with caplog.at_level(logging.INFO, logger="scheduler_app.dispatcher.runner"):
        outcome = run(claimed("boom", "kaput"))
    line = caplog.records[-1]
    assert line.levelno == logging.INFO
    retry_at = outcome.retry_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert re.fullmatch(
        rf"job 5 attempt 1/3 of {T}boom failed in \d+\.\d{{3}}s \(ValueError: kaput\); retry at {re.escape(retry_at)}",
        line.getMessage(),
    ), line.getMessage()
    assert "pending" not in line.getMessage()
    assert line.job_id == 5 and line.outcome == "retry"


def test_the_last_failed_attempt_is_logged_as_failed_with_its_reason(caplog):
    with caplog.at_level(logging.INFO, logger="scheduler_app.dispatcher.runner"):
        run(claimed("boom", "kaput", attempt=3))
    line = caplog.records[-1]
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert message.startswith(f"job 5 failed: {T}boom attempt 3/3 in ") and message.endswith("(ValueError: kaput)")


def test_an_attempt_that_ends_after_its_deadline_is_a_timeout(sent):
    outcome = run(claimed("sleeper", 0.05, timeout=0.01), deadline=time.time() + 0.01)
    assert outcome.status == "pending" and outcome.error["exception_class"] == TIMEOUT_CLASS
    assert sent[-1][2] == TaskResultStatus.READY  # task_finished says what the row will say


def test_signals_name_a_scheduler_backend_even_after_the_task_backend_went_away(sent, settings):
    settings.TASKS = {"sched": {**settings.TASKS["default"]}}  # "default", the tasks' alias, is gone
    outcome = run(claimed("add", 1, 1))
    assert outcome.status == "succeeded"
    assert [(sender, result.backend) for _, sender, _, _, result in sent] == [(SchedulerBackend, "sched")] * 2


class _CancelledOnceAsked:
    """A cancel event that is clear when the attempt starts and set when the task asks."""

    def __init__(self):
        self.asked = 0

    def is_set(self):
        self.asked += 1
        return self.asked > 1


def test_a_cancelled_attempt_is_an_info_line_that_says_cancelled(sent, caplog, django_tasks_log_level):
    django_tasks_log_level(logging.INFO)
    executor = Executor(RetryPolicy(base=2.0, jitter=0.0), own_connections=False)
    with caplog.at_level(logging.INFO, logger="django.tasks"):
        outcome = executor(claimed("cooperative", attempt=1), _CancelledOnceAsked(), None)
    assert outcome.status == "cancelled"
    [line] = [
        r
        for r in caplog.records
        if r.name == "django.tasks" and "state=" in r.getMessage() and "FAILED" in r.getMessage()
    ]
    assert line.levelno == logging.INFO and line.exc_info is None
    assert re.fullmatch(rf"Task id=5 path={T}cooperative cancelled \(state=FAILED\)", line.getMessage())
    # Other receivers still get django.tasks' own status for it (no CANCELLED there).
    assert [(name, status) for name, _, status, *_ in sent][-1] == ("finished", TaskResultStatus.FAILED)
    # A failure of another job is still Django's ERROR line.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="django.tasks"):
        run(claimed("boom", "kaput", attempt=3))
    [line] = [r for r in caplog.records if r.name == "django.tasks" and "FAILED" in r.getMessage()]
    assert line.levelno == logging.ERROR and "cancelled" not in line.getMessage()


def test_a_cancel_is_not_logged_when_django_tasks_is_at_warning(caplog, django_tasks_log_level):
    django_tasks_log_level(logging.WARNING)
    executor = Executor(RetryPolicy(base=2.0, jitter=0.0), own_connections=False)
    with caplog.at_level(logging.DEBUG, logger="scheduler_app"):
        assert executor(claimed("cooperative"), _CancelledOnceAsked(), None).status == "cancelled"
    assert [r for r in caplog.records if r.name == "django.tasks"] == []
