"""Bench settings for this project: the project's settings plus the bench app."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]  # noqa: F405
DEBUG = False  # no query log growing in memory during long runs
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The io measurement's async queue (bench/run.py: rundispatcher --queue io:200:async).
if "io" not in TASKS["default"]["QUEUES"]:  # noqa: F405
    TASKS["default"]["QUEUES"] = [*TASKS["default"]["QUEUES"], "io"]  # noqa: F405

# The observability measurement turns log capture and rollups on and off.
import os  # noqa: E402

for _name in ("JOB_LOG_MAX_RECORDS", "ROLLUP_INTERVAL"):
    if os.environ.get(f"BENCH_{_name}"):
        SCHEDULER[_name] = type(SCHEDULER.get(_name, 0) or 0)(float(os.environ[f"BENCH_{_name}"]))  # noqa: F405
