"""Run ``manage.py rundispatcher`` with claim counting (bench instrumentation only).

The app is not changed: ``DjangoStore.claim`` is wrapped in this process to
count claim statements, rows asked for and rows returned. The counts are
written as JSON to $BENCH_CLAIM_STATS when the process exits.
"""

import atexit
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.drivers.common import setup_django

setup_django("bench.settings_ours")

from scheduler_app.runtime import store  # noqa: E402

stats = {"claims": 0, "asked": 0, "got": 0, "short": 0, "empty": 0}
_claim = store.DjangoStore.claim


def counted_claim(self, queues, limit, now, *args, **kwargs):
    jobs = _claim(self, queues, limit, now, *args, **kwargs)
    stats["claims"] += 1
    stats["asked"] += limit
    stats["got"] += len(jobs)
    if len(jobs) < limit:
        stats["short"] += 1
    if not jobs:
        stats["empty"] += 1
    return jobs


store.DjangoStore.claim = counted_claim


@atexit.register
def _dump():
    path = os.environ.get("BENCH_CLAIM_STATS")
    if path:
        with open(path, "w") as f:
            json.dump(stats, f)


from django.core.management import execute_from_command_line  # noqa: E402

try:
    execute_from_command_line(["manage.py", "rundispatcher", *sys.argv[1:]])
finally:
    _dump()
