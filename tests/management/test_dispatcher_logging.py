"""With no logging configured for the app, ``rundispatcher`` logs to stderr at INFO (as Celery's
worker does); a project's LOGGING for ``scheduler_app`` is followed instead."""

import logging
import re
import sys

import pytest

from scheduler_app import enqueue
from scheduler_app.runtime import wiring
from tests.plumbing import ROOT, manage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BOOM = "tests.testapp.tasks.boom"


def run_dispatcher(tmp_path, settings_text):
    """Run ``rundispatcher --burst`` under a settings module made of tests.settings and ``settings_text``."""
    import subprocess

    (tmp_path / "these_settings.py").write_text("from tests.settings import *  # noqa\n" + settings_text)
    cmd, env = manage("rundispatcher", "--burst")
    env["DJANGO_SETTINGS_MODULE"] = "these_settings"
    env["PYTHONPATH"] = f"{tmp_path}:{ROOT}"
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def jobs_that_retry_and_fail():
    retried, _ = enqueue(BOOM, ["once"], max_attempts=2)
    failed, _ = enqueue(BOOM, ["for good"], max_attempts=1)
    return retried, failed


def test_without_logging_the_dispatcher_speaks_on_stderr_at_info(tmp_path):
    retried, failed = jobs_that_retry_and_fail()
    done = run_dispatcher(tmp_path, "LOGGING = {}\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dispatcher ")  # the banner, as before
    lines = done.stderr.splitlines()
    assert any(
        f"INFO scheduler_app.dispatcher.runner job {retried.pk} attempt 1/2 of {BOOM} failed" in line
        and "retry at" in line
        for line in lines
    ), done.stderr
    assert any(f"WARNING scheduler_app.dispatcher.runner job {failed.pk} failed" in line for line in lines), done.stderr
    # 2 jobs, or 3 attempts when the retry (the suite's backoff: 0.05 s) came due within the burst.
    assert any(
        "INFO scheduler_app.dispatcher dispatcher " in line and re.search(r"stopped: [23] jobs processed", line)
        for line in lines
    ), done.stderr


def test_a_projects_logging_is_followed(tmp_path):
    _, failed = jobs_that_retry_and_fail()
    log_file = tmp_path / "dispatcher.log"
    done = run_dispatcher(
        tmp_path,
        f"""
LOGGING = {{
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {{"file": {{"class": "logging.FileHandler", "filename": {str(log_file)!r}}}}},
    "loggers": {{"scheduler_app": {{"handlers": ["file"], "level": "WARNING", "propagate": False}}}},
}}
""",
    )
    assert done.returncode == 0, done.stderr
    assert "scheduler_app.dispatcher" not in done.stderr, done.stderr  # (django.tasks logs its own failures)
    written = log_file.read_text()
    assert f"job {failed.pk} failed" in written
    assert "retry at" not in written and "stopped:" not in written  # INFO: below the project's level


@pytest.mark.django_db(transaction=False)
def test_a_handler_anywhere_above_or_below_counts_as_configured():
    def fresh():
        """The app's logger in a logging tree of its own, as a fresh project leaves it."""
        root = logging.RootLogger(logging.WARNING)
        return logging.Manager(root).getLogger("scheduler_app"), root

    app, _ = fresh()
    handler = wiring.log_to_stderr_unless_configured(sys.stderr, app)
    assert app.handlers == [handler] and app.level == logging.INFO
    assert handler.stream is sys.stderr
    app, _ = fresh()
    app.setLevel(logging.WARNING)  # a level the project chose is kept
    assert wiring.log_to_stderr_unless_configured(sys.stderr, app) is not None and app.level == logging.WARNING
    app, root = fresh()
    root.addHandler(logging.NullHandler())
    assert wiring.log_to_stderr_unless_configured(sys.stderr, app) is None and app.handlers == []
    app, root = fresh()
    root.addHandler(logging.NullHandler())
    app.propagate = False  # records stop here: the root's handler never sees them
    assert wiring.log_to_stderr_unless_configured(sys.stderr, app) is not None
    app, _ = fresh()
    app.manager.getLogger("scheduler_app.dispatcher.runner").addHandler(logging.NullHandler())
    assert wiring.log_to_stderr_unless_configured(sys.stderr, app) is None
