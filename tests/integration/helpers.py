"""Run dispatchers on threads and in subprocesses against the test database."""

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from django.db import connection, connections

from scheduler_app.dispatcher import wiring

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout=30.0, interval=0.02):
    """Poll until predicate() is true; return False on timeout (a hang guard, not a timing assertion)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return False


@contextmanager
def dispatcher_thread(groups=None, **options):
    """Run a database-backed dispatcher on a thread for the block; stop it after."""
    groups = groups or {"*": ({"default", "slow", "other"}, 4)}
    options.setdefault("poll_interval", 0.2)
    options.setdefault("housekeeping_interval", 3600)
    dispatcher = wiring.create(groups, **options)
    errors = []

    def run():
        try:
            with wiring.wakeups(dispatcher) as listener:
                if listener is not None:
                    listener.connected.wait(10)
                started.set()
                dispatcher.run()
        except BaseException as exc:  # surfaced by the test below
            errors.append(exc)
            started.set()
        finally:
            connections.close_all()

    started = threading.Event()
    thread = threading.Thread(target=run, name="test-dispatcher", daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield dispatcher
    finally:
        dispatcher.stop()
        thread.join(30)
        assert not thread.is_alive(), "dispatcher thread did not stop"
        assert not errors, errors


def child_env(**extra):
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["SCHEDULER_TEST_DB_NAME"] = str(connection.settings_dict["NAME"])
    env["PYTHONUNBUFFERED"] = "1"
    env["SCHEDULER_LOG_LEVEL"] = extra.pop("log_level", "WARNING")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(*args, **env):
    return [sys.executable, str(ROOT / "manage.py"), *args], child_env(**env)


def start_dispatcher(*args, log_path=None, **env):
    """Start `manage.py rundispatcher ARGS` against the test database; return the Popen."""
    cmd, environment = manage("rundispatcher", *args, **env)
    out = open(log_path, "w") if log_path else subprocess.DEVNULL
    return subprocess.Popen(cmd, env=environment, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def run_manage(*args, timeout=120, **env):
    cmd, environment = manage(*args, **env)
    return subprocess.run(cmd, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def markers(directory):
    """Return {job_id: number of executions} from the `record` task's marker files."""
    counts = {}
    for name in os.listdir(directory):
        job_id = int(name.split("-", 1)[0])
        counts[job_id] = counts.get(job_id, 0) + 1
    return counts
