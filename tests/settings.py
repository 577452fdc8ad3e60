"""Test settings: the project's, plus a test app with test tasks and a third queue.

SQLite tests use a file (not :memory:) so that worker threads and dispatcher
subprocesses share the test database. A subprocess is pointed at the test
database with SCHEDULER_TEST_DB_NAME (see tests/conftest.py).
"""

import os

from project.settings import *  # noqa: F403
from project.settings import BASE_DIR, DATABASES, INSTALLED_APPS, SCHEDULER, TASKS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
TASKS["default"]["QUEUES"] = ["default", "slow", "other"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SCHEDULER = {**SCHEDULER, "RETRY_BACKOFF_BASE": 0.05, "RETRY_JITTER": 0.0, "TASK_MODULES": ["tests.testapp.jobs"]}

# Cancel-grace tests start dispatchers with a short grace (the default is 5 s).
if os.environ.get("SCHEDULER_TEST_CANCEL_GRACE"):
    SCHEDULER["CANCEL_GRACE"] = float(os.environ["SCHEDULER_TEST_CANCEL_GRACE"])

_db = DATABASES["default"]
_child_name = os.environ.get("SCHEDULER_TEST_DB_NAME")
if _child_name:
    # A dispatcher subprocess started by a test: use the test database as is.
    _db["NAME"] = _child_name
elif _db["ENGINE"].endswith("sqlite3"):
    (BASE_DIR / "test-artifacts").mkdir(exist_ok=True)
    # One file per test run, so that parallel runs never share a database.
    _db["TEST"] = {"NAME": str(BASE_DIR / "test-artifacts" / f"test-db-{os.getpid()}.sqlite3")}
else:
    _db["TEST"] = {"NAME": f"test_{_db['NAME']}_{os.getpid()}"}

# Process-queue tests: a worker process's Django setup takes this many seconds
# longer, so that its start-up cannot pass for its task's run (or, past the
# start-up bound, never ends). Only in worker processes (multiprocessing children).
_setup_delay = os.environ.get("SCHEDULER_TEST_WORKER_SETUP_DELAY")
if _setup_delay:
    import multiprocessing
    import time

    if multiprocessing.parent_process() is not None:
        time.sleep(float(_setup_delay))
