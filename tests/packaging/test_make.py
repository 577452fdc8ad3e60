"""``make run``'s console and ``make test``'s passes, as docs/OPERATIONS.md describes them."""

import logging
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from project.console import NoDemoChatter, QuietPolling
from tests.packaging.readme import ROOT

once = pytest.mark.once  # the suite's own marker: runs in the SQLite pass only (tests/conftest.py)


def server_line(request_line, status):
    record = logging.LogRecord(
        "django.server", logging.INFO, "", 0, '"%s" %s %s', (request_line, str(status), "12"), None
    )
    record.status_code = status
    return record


@pytest.mark.parametrize(
    ("request_line", "status", "shown"),
    [
        ("GET /admin/scheduler_app/job/live/?status__exact=failed HTTP/1.1", 200, False),
        ("GET /admin/scheduler_app/job/42/live/ HTTP/1.1", 200, False),
        ("GET /admin/scheduler_app/dashboard/data/?minutes=60 HTTP/1.1", 200, False),
        ("GET /admin/scheduler_app/queue/data/ HTTP/1.1", 304, False),
        ("GET /static/scheduler_app/js/live.js HTTP/1.1", 200, False),
        # What a person did, and anything that went wrong, stays.
        ("GET /admin/scheduler_app/job/ HTTP/1.1", 200, True),
        ("POST /admin/scheduler_app/job/42/retry/ HTTP/1.1", 302, True),
        ("GET /admin/scheduler_app/job/live/ HTTP/1.1", 500, True),
        ("GET /admin/scheduler_app/dashboard/data/ HTTP/1.1", 403, True),
    ],
)
def test_the_dev_server_leaves_out_the_polling(request_line, status, shown):
    assert QuietPolling().filter(server_line(request_line, status)) is shown


def test_the_console_leaves_out_the_demo_tasks_own_lines():
    def record(name):
        return logging.LogRecord(name, logging.INFO, "", 0, "step %d of %d done", (1, 20), None)

    assert not NoDemoChatter().filter(record("scheduler_app.demo.tasks"))
    assert NoDemoChatter().filter(record("scheduler_app.dispatcher.runner"))
    assert NoDemoChatter().filter(record("scheduler_app.dispatcher.loop"))


@once
def test_the_project_settings_use_them():
    from project.settings import LOGGING

    assert LOGGING["handlers"]["django.server"]["filters"] == ["quiet_polling"]
    assert LOGGING["handlers"]["console"]["filters"] == ["no_demo_chatter", "one_line_demo_failure"]
    assert LOGGING["loggers"]["django.server"]["handlers"] == ["django.server"]


@once
def test_make_run_prints_where_to_log_in_last():
    script = (ROOT / "scripts" / "run.sh").read_text()
    summary = script.index("cat <<SUMMARY")
    assert (
        script.index("setsid $PY manage.py runserver") < summary
        and script.index("setsid $PY manage.py rundispatcher") < summary
    )
    assert script.index("bootstrap=$($PY manage.py bootstrap_demo)") < summary
    assert "${HOST:-127.0.0.1}" in script and "${PORT:-8000}" in script


def run_test_sh(*args, **env):
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    environment.update(env)
    return subprocess.run(
        ["scripts/test.sh", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )


@once
@pytest.mark.slow
def test_make_test_runs_the_sqlite_pass_alone():
    done = run_test_sh(
        "-q", "-p", "no:randomly", "tests/vocabulary/test_wakeup.py", SCHEDULER_TEST_DBS="sqlite", REQUIRE_POSTGRES="1"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "== SQLite ==" in done.stdout and "== PostgreSQL" not in done.stdout
    assert "the PostgreSQL pass is left out" in done.stdout
    bad = run_test_sh("tests/vocabulary/test_wakeup.py", SCHEDULER_TEST_DBS="mysql")
    assert bad.returncode == 2 and "SCHEDULER_TEST_DBS must be sqlite, postgres" in bad.stderr


@once
@pytest.mark.slow
def test_the_scheduler_fixture_works_in_the_repositorys_own_virtualenv():
    """A test anywhere in the checkout (not only under tests/) gets ``scheduler``, installed package or not,
    on the test database even when it asks for no other fixture."""
    where = ROOT / f"scratch-fixture-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    try:
        (where / "test_uses_the_fixture.py").write_text(
            textwrap.dedent("""
            from django.db import connection

            from scheduler_app.demo.tasks import echo


            def test_it(scheduler):
                # On the test database, not the project's (make run's demo jobs are in that one).
                assert "test-db-" in connection.settings_dict["NAME"]
                assert scheduler.enqueued() == []
                echo.enqueue("hi")
                scheduler.assert_enqueued(echo, args=["hi"])
                assert scheduler.drain()["succeeded"] == 1
        """)
        )
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
        env.pop("DATABASE_URL", None)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", str(where)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    finally:
        shutil.rmtree(where)
