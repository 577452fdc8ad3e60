"""`make run`'s first hour: the one-time password, then how to set one; the demo's failure in one line."""

import logging
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

pytestmark = pytest.mark.django_db


@override_settings(DEBUG=True)
def test_the_first_run_shows_a_password_and_a_later_one_says_how_to_set_one():
    first = StringIO()
    call_command("bootstrap_demo", stdout=first)
    assert "Log in as admin, password " in first.getvalue()
    later = StringIO()
    call_command("bootstrap_demo", stdout=later)
    assert "password" in later.getvalue() and "Log in as admin, password " not in later.getvalue()
    assert "manage.py changepassword admin" in later.getvalue()


def test_the_demos_deliberate_failure_is_one_line():
    from project.console import OneLineDemoFailure

    try:
        raise RuntimeError("demo failure")
    except RuntimeError:
        exc_info = sys.exc_info()
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(OneLineDemoFailure())
    log = logging.getLogger("django.tasks")
    record = log.makeRecord(
        "django.tasks",
        logging.ERROR,
        __file__,
        1,
        "Task id=%s path=%s state=%s",
        (7, "scheduler_app.demo.tasks.fail", "FAILED"),
        exc_info,
    )
    handler.handle(record)
    assert stream.getvalue().count("\n") == 1 and "Traceback" not in stream.getvalue()
    other = log.makeRecord(
        "django.tasks",
        logging.ERROR,
        __file__,
        1,
        "Task id=%s path=%s state=%s",
        (8, "myapp.tasks.charge", "FAILED"),
        exc_info,
    )
    handler.handle(other)
    assert "Traceback" in stream.getvalue()  # a real task's failure keeps its traceback
