"""``runtime.forks``: a child forked by a task exits when it comes back out of the task, is
ended with its attempt, and never uses its parent's database session. Real forks of this
process (each child ends itself with ``os._exit``: it never runs the test suite on)."""

import os
import time

import pytest
from django.db import connection, connections

from scheduler_app.models import Job
from scheduler_app.runtime import forks
from tests.testapp import tasks

pytestmark = pytest.mark.slow


def call(task, *args, **kwargs):
    """``forks.call`` in an attempt, with a net: a child that got out of it anyway ends here (exit code 99)."""
    forks.install()
    pid = os.getpid()
    try:
        with forks.attempt():  # and one stuck in asgiref's loop thread is killed at its end
            return forks.call(task, *args, **kwargs)
    finally:
        if os.getpid() != pid:
            os._exit(99)


@pytest.mark.once  # no database
@pytest.mark.parametrize(
    ("task", "kwargs", "code"),
    [
        (tasks.forks, {}, 0),  # it returned
        (tasks.forks, {"child_exit": 3}, 3),  # sys.exit(3)
        (tasks.forks, {"child_exit": "bye"}, 1),  # sys.exit("bye"): printed, 1
        (tasks.async_forks, {}, 0),  # forked on asgiref's loop thread
        (tasks.async_forks, {"child_exit": 4}, 4),
    ],
)
def test_a_child_that_comes_back_out_of_the_task_exits_at_once_as_python_would(tmp_path, task, kwargs, code):
    if task is tasks.forks:
        kwargs = {**kwargs, "wait": True}
    assert call(task, str(tmp_path), "a", **kwargs) == code


@pytest.mark.once  # no database
def test_the_children_an_attempt_leaves_running_are_killed_and_reaped_at_its_end():
    forks.install()
    with forks.attempt() as attempt:
        running = os.fork()
        if running == 0:
            time.sleep(60)
            os._exit(0)
        ended = os.fork()
        if ended == 0:
            os._exit(0)
        os.waitpid(ended, 0)  # the task waited for this one: not the attempt's to end
    assert attempt.killed == 1
    with pytest.raises(ChildProcessError):  # reaped: no zombie is left either
        os.waitpid(running, os.WNOHANG)


@pytest.mark.django_db(transaction=True)
def test_a_forked_child_never_uses_nor_closes_its_parents_database_session():
    forks.install()
    before = Job.objects.count()
    session = connection.connection
    backend = _backend()
    with forks.attempt():
        child = os.fork()
        if child == 0:
            code = 1
            try:
                inherited = connection.connection is None
                Job.objects.count()  # a connection of its own
                mine = connection.connection is not session
                connections.close_all()  # as a request's end would: only its own goes
                code = 0 if inherited and mine else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's session is the one it had, and it still answers.
    assert connection.connection is session and _backend() == backend
    assert Job.objects.count() == before


def _backend():
    """Return the server's id for this connection's session (PostgreSQL), or the connection object's."""
    if connection.vendor != "postgresql":
        return id(connection.connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.once  # no database
def test_a_task_is_called_as_its_own_class_calls_it():
    """A plain task's function is called as ``Task.call`` calls it; a Task class with a ``call`` of its own is asked."""
    from dataclasses import fields

    from django.tasks import Task

    class Loud(Task):
        def call(self, *args, **kwargs):
            return ("loud", super().call(*args, **kwargs))

    loud = Loud(**{f.name: getattr(tasks.add, f.name) for f in fields(tasks.add) if f.init})
    assert forks.call(tasks.add, 2, 3) == 5
    assert forks.call(loud, 2, 3) == ("loud", 5)
