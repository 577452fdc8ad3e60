"""The django.tasks backend: enqueue, get_result, options, async, and the registry guard."""

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone

from scheduler_app import registry
from scheduler_app.models import Job
from tests.testapp import tasks as t

pytestmark = pytest.mark.django_db(transaction=True)


def test_backend_capabilities():
    backend = task_backends["default"]
    assert backend.supports_defer and backend.supports_priority
    assert backend.supports_get_result and backend.supports_async_task


def test_enqueue_and_get_result_round_trip():
    result = t.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY and not result.is_finished
    job = Job.objects.get(pk=int(result.id))
    assert (job.task, job.args, job.queue, job.priority) == ("tests.testapp.tasks.add", [2, 3], "default", 0)
    call_command("rundispatcher", "--burst")
    fetched = t.add.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL and fetched.return_value == 5
    assert fetched.attempts == 1 and len(fetched.worker_ids) == 1
    assert fetched.started_at and fetched.finished_at
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_using_run_after_priority_and_queue():
    when = timezone.now() + timedelta(hours=2)
    result = t.add.using(run_after=when, priority=42, queue_name="slow").enqueue(1, 1)
    job = Job.objects.get(pk=int(result.id))
    assert (job.execute_at, job.priority, job.queue) == (when, 42, "slow")
    assert result.task.priority == 42


def test_priority_bounds_and_unknown_queue_are_rejected():
    with pytest.raises(InvalidTask):
        t.add.using(priority=101)
    with pytest.raises(InvalidTask):
        t.add.using(priority=-101)
    with pytest.raises(InvalidTask):
        t.add.using(queue_name="nope")
    with pytest.raises(InvalidTask):
        t.add.using(run_after=timezone.now().replace(tzinfo=None))
    assert Job.objects.count() == 0


def test_failed_task_maps_errors():
    result = t.boom.using().enqueue("kaput")
    Job.objects.filter(pk=int(result.id)).update(max_attempts=1)
    call_command("rundispatcher", "--burst")
    fetched = task_backends["default"].get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert fetched.errors[0].exception_class is ValueError
    assert "kaput" in fetched.errors[0].traceback
    with pytest.raises(ValueError):
        _ = fetched.return_value


def test_cancelled_maps_to_failed():
    result = t.add.enqueue(1, 1)
    from scheduler_app import lifecycle

    lifecycle.cancel(int(result.id))
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.FAILED


def test_unknown_result_ids():
    backend = task_backends["default"]
    for bad in ("999999", "abc", "", "1e400"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)


def test_async_task_and_async_api():
    result = async_to_sync(t.async_add.aenqueue)(20, 22)
    call_command("rundispatcher", "--burst")
    fetched = async_to_sync(t.async_add.aget_result)(result.id)
    assert fetched.return_value == 42


def test_arguments_django_would_refuse_are_a_type_error_as_there_the_rest_an_invalid_task_only():
    """Code that catches TypeError around enqueue(), as it would with Django's own backends, catches ours."""
    from django.tasks.backends.immediate import ImmediateBackend

    theirs = ImmediateBackend("immediate", {"QUEUES": [], "OPTIONS": {}})
    with pytest.raises(TypeError):
        theirs.enqueue(t.add, [object(), 1], {})
    for call in (
        lambda: t.add.enqueue(object(), 1),
        lambda: t.add.enqueue(1, b={1, 2}),
        lambda: async_to_sync(t.add.aenqueue)(object(), 1),
        lambda: t.add.enqueue(1),  # not its signature: Python's own TypeError
    ):
        with pytest.raises(TypeError) as caught:
            call()
        assert isinstance(caught.value, InvalidTask)
    with pytest.raises(InvalidTask) as caught:
        t.add.using(priority=101)
    assert not isinstance(caught.value, TypeError)
    assert Job.objects.count() == 0


def test_tasks_outside_tasks_modules_are_refused():
    # Not in an installed app's tasks.py: a dispatcher could not run it.
    from tests.testapp.stray import stray

    with pytest.raises(InvalidTask, match="is not a registered task"):
        stray.enqueue()
    assert Job.objects.count() == 0


def test_registry_is_exactly_the_tasks_modules():
    names = registry.names()
    assert "tests.testapp.tasks.add" in names
    assert "scheduler_app.tasks.send_email" in names
    assert "scheduler_app.demo.tasks.noop" in names
    assert not any(n.startswith(("os.", "builtins.", "subprocess.")) for n in names)
    with pytest.raises(registry.UnknownTask):
        registry.get("os.system")


def test_registry_never_imports_a_requested_path(monkeypatch):
    import importlib
    import sys

    calls = []
    monkeypatch.setattr(importlib, "import_module", lambda *a, **k: calls.append(a))
    with pytest.raises(registry.UnknownTask):
        registry.get("tests.testapp.never_imported.task")
    assert calls == [] and "tests.testapp.never_imported" not in sys.modules


def test_task_enqueue_takes_the_key_and_expiry_of_its_options_and_refuses_what_cannot_fill_them(db):
    result = t.keyed_span.enqueue("/tmp", 7)
    job = Job.objects.get(pk=int(result.id))
    assert (job.concurrency_key, job.concurrency_limit) == ("account:7", 2)
    assert timezone.now() + timedelta(minutes=59) < job.expires_at <= timezone.now() + timedelta(hours=1)
    with pytest.raises(InvalidTask, match="args"):
        t.keyed_span.enqueue("/tmp")
