"""Jobs as django.tasks reports them: task signals end to end, and the times of a TaskResult."""

import logging
import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.tasks import TaskResultStatus, task_backends
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone

from scheduler_app import lifecycle, registry, taskresults
from scheduler_app.backends import SchedulerBackend
from scheduler_app.models import Job
from scheduler_app.vocabulary.jobs import Outcome
from scheduler_app.vocabulary.policy import RetryPolicy
from tests import plumbing
from tests.plumbing import ROOT, dispatcher_thread, wait_for
from tests.testapp import tasks as t

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"
QUEUES = ["default", "slow", "other"]


@pytest.fixture
def signals():
    """Record every task signal: (name, sender, status, thread name, TaskResult)."""
    calls = []
    names = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}

    def receiver(signal, sender, task_result, **kwargs):
        calls.append((names[signal], sender, task_result.status, threading.current_thread().name, task_result))

    for signal in names:
        signal.connect(receiver, dispatch_uid="test-taskresults")
    yield calls
    for signal in names:
        signal.disconnect(dispatch_uid="test-taskresults")


# -- task_enqueued ---------------------------------------------------------


def test_enqueue_through_django_tasks_sends_task_enqueued(signals):
    result = t.add.enqueue(2, 3)
    [(name, sender, status, thread, sent)] = signals
    assert (name, sender, status) == ("enqueued", SchedulerBackend, TaskResultStatus.READY)
    assert thread == threading.current_thread().name  # in the enqueuing process and thread
    assert sent.id == result.id and sent.args == [2, 3] and sent.backend == "default"
    assert sent.enqueued_at == result.enqueued_at is not None
    assert sent.task.func is t.add.func and sent.task.run_after is None


def test_every_entry_point_sends_task_enqueued_but_a_unique_key_hit_does_not(signals):
    job, _ = lifecycle.enqueue(ADD, [1, 1], unique_key="k")  # admin, API, command
    lifecycle.enqueue(ADD, [1, 1], unique_key="k")  # returns the same job
    many = lifecycle.enqueue_many([{"task": ADD, "args": [i, i]} for i in range(3)])  # bulk API
    assert [s.id for _, _, _, _, s in signals] == [str(j.pk) for j in [job, *many]]
    assert {name for name, *_ in signals} == {"enqueued"}


def test_a_bulk_enqueue_asks_once_per_sender_whether_anyone_listens(monkeypatch):
    class Quiet:
        """A sender nobody listens to."""

    class Heard:
        """A sender with a receiver of its own."""

    senders = {ADD: Quiet, "tests.testapp.tasks.important": Heard}
    monkeypatch.setattr(taskresults, "sender_of", lambda task, alias=None: (senders[registry.name_of(task)], "default"))
    asked, real = [], taskresults.wanted
    monkeypatch.setattr(
        taskresults, "wanted", lambda signal, sender, level=None: asked.append(sender) or real(signal, sender, level)
    )
    heard = []
    task_enqueued.connect(
        lambda sender, task_result, **kw: heard.append((sender, task_result.id)),
        sender=Heard,
        dispatch_uid="test-heard",
        weak=False,
    )
    try:
        jobs = lifecycle.enqueue_many(
            [
                {"task": ADD, "args": [1, 1]},
                {"task": "tests.testapp.tasks.important"},
                {"task": ADD, "args": [2, 2]},
                {"task": "tests.testapp.tasks.important"},
            ]
        )
    finally:
        task_enqueued.disconnect(sender=Heard, dispatch_uid="test-heard")
    assert heard == [(Heard, str(jobs[1].pk)), (Heard, str(jobs[3].pk))]
    assert sorted(s.__name__ for s in asked) == ["Heard", "Quiet"]  # once each, not once per job


def test_an_enqueued_receiver_that_raises_does_not_break_the_enqueue(caplog):
    def bad(**kwargs):
        raise RuntimeError("receiver bug")

    task_enqueued.connect(bad, dispatch_uid="test-bad")
    try:
        result = t.add.enqueue(1, 1)
    finally:
        task_enqueued.disconnect(dispatch_uid="test-bad")
    assert Job.objects.filter(pk=int(result.id)).exists()
    assert any("task_enqueued" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


# -- task_started / task_finished from a dispatcher ------------------------


def test_every_attempt_sends_started_and_finished_from_its_worker_thread(signals, marker_dir):
    result = t.flaky.enqueue(marker_dir, 1)
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.get(pk=int(result.id)).status == "succeeded", 30)
    ran = [(name, status) for name, _, status, _, s in signals if s.id == result.id]
    assert ran == [
        ("enqueued", TaskResultStatus.READY),
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.READY),  # will be retried
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]
    work = [c for c in signals if c[0] != "enqueued"]
    assert all(sender is SchedulerBackend for _, sender, *_ in work)
    assert all(thread.startswith("scheduler-") for _, _, _, thread, _ in work)  # worker threads
    first, second = work[1][4], work[3][4]
    assert [e.exception_class_path for e in first.errors] == ["builtins.RuntimeError"]
    assert first.task.run_after is not None  # deferred to its retry
    assert second.return_value == 1 and len(second.errors) == 1 and second.attempts == 2
    assert second.started_at == first.started_at < second.last_attempted_at
    stored = t.flaky.get_result(result.id)
    assert (stored.started_at, stored.last_attempted_at) == (second.started_at, second.last_attempted_at)


def test_a_task_returning_what_cannot_be_stored_fails_with_the_reason(signals):
    result = t.unserializable.enqueue()
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.get(pk=int(result.id)).status == "failed", 30)
    job = Job.objects.get(pk=int(result.id))
    assert job.attempts == 1  # it would fail the same way again: not retried
    [error] = job.errors
    assert "cannot be stored as JSON" in error["message"] and "object" in error["message"]
    assert "Traceback" in error["traceback"] and "TypeError" in error["traceback"]
    fetched = t.unserializable.get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert fetched.errors[0].exception_class is TypeError
    assert "not JSON serializable" in fetched.errors[0].traceback
    finished = [s for name, _, _, _, s in signals if name == "finished"]
    assert finished[-1].status == TaskResultStatus.FAILED and finished[-1].errors[0].traceback


def test_a_job_enqueued_through_another_backend_reports_it_in_every_result_and_signal(signals, settings):
    """``task.using(backend=...)``: the job keeps the alias; enqueue, refresh, get_result and every signal report it."""
    settings.TASKS = {
        **settings.TASKS,
        "second": {"BACKEND": "scheduler_app.backends.SchedulerBackend", "QUEUES": QUEUES},
    }
    result = t.add.using(backend="second").enqueue(2, 3)
    assert (result.backend, result.task.backend) == ("second", "second")
    with dispatcher_thread():
        assert wait_for(lambda: Job.objects.get(pk=int(result.id)).status == "succeeded", 30)
    result.refresh()
    assert (result.status, result.backend, result.task.backend, result.return_value) == (
        TaskResultStatus.SUCCESSFUL,
        "second",
        "second",
        5,
    )
    for backend in ("default", "second"):  # whichever backend reads it back
        fetched = task_backends[backend].get_result(result.id)
        assert (fetched.backend, fetched.task.backend) == ("second", "second"), backend
    sent = [(name, s.backend, s.task.backend) for name, _, _, _, s in signals if s.id == result.id]
    assert sent == [(name, "second", "second") for name in ("enqueued", "started", "finished")]
    plain = t.add.enqueue(1, 1)
    assert task_backends["second"].get_result(plain.id).backend == "default"


@pytest.mark.once  # parallelism, restarts, logging: not the database's
def test_django_tasks_logger_follows_scheduler_log_level_from_warning_up_and_at_debug():
    code = (
        "import django, logging; django.setup(); "
        "print(logging.getLogger('django.tasks').getEffectiveLevel(), "
        "logging.getLogger('scheduler_app').getEffectiveLevel())"
    )
    # Django's per-job lines are DEBUG detail: at INFO they stay off.
    for level, tasks_level in (("ERROR", "ERROR"), ("DEBUG", "DEBUG"), ("INFO", "WARNING")):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "SCHEDULER_LOG_LEVEL": level}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        expected = [str(logging.getLevelName(tasks_level)), str(logging.getLevelName(level))]
        assert out.stdout.split() == expected, out.stderr


# -- started_at, last_attempted_at, run_after ------------------------------


def claim(worker, now):
    return plumbing.claim(worker, queues=QUEUES, limit=1, lease=30, now=now)


def test_started_at_is_the_first_attempt_and_last_attempted_at_the_latest():
    result = t.add.enqueue(1, 2)
    first_at = timezone.now()
    (first,) = claim("a", first_at)
    assert (first.started_at, first.last_attempted_at) == (first_at, first_at)
    retry = RetryPolicy(base=0.0, jitter=0.0).raised(first, RuntimeError("x"), first_at)
    lifecycle.finish([retry], now=first_at)
    second_at = first_at + timedelta(seconds=5)
    (second,) = claim("b", second_at)
    assert (second.started_at, second.last_attempted_at) == (first_at, second_at)
    job = Job.objects.get(pk=int(result.id))
    assert (job.started_at, job.last_attempted_at) == (first_at, second_at)
    fetched = t.add.get_result(result.id)
    assert (fetched.started_at, fetched.last_attempted_at) == (first_at, second_at)
    lifecycle.finish([Outcome(job.pk, "b", 2, "succeeded", result_json="3")], now=second_at + timedelta(seconds=2))
    assert Job.objects.get(pk=job.pk).duration == timedelta(seconds=2)  # the last attempt's


def test_run_after_only_for_deferred_jobs():
    now_job = t.add.enqueue(1, 1)
    assert now_job.task.run_after is None
    assert t.add.get_result(now_job.id).task.run_after is None
    when = timezone.now() + timedelta(hours=2)
    later = t.add.using(run_after=when).enqueue(1, 1)
    assert later.task.run_after == when and t.add.get_result(later.id).task.run_after == when
    job, _ = lifecycle.enqueue(ADD, [1, 1])  # the admin, the API, the command: same rule
    assert task_backends["default"].get_result(str(job.pk)).task.run_after is None
    moved = lifecycle.reschedule(job.pk, execute_at=when)
    assert task_backends["default"].get_result(str(moved.pk)).task.run_after == when


def test_a_result_survives_a_change_of_the_backend_queues(settings):
    """get_result() describes a stored job without validating its task again."""
    job, _ = lifecycle.enqueue(ADD, [1, 1], queue="other", priority=7)
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["default"]}}
    fetched = task_backends["default"].get_result(str(job.pk))
    assert (fetched.task.queue_name, fetched.task.priority) == ("other", 7)
