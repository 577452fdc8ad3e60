"""The dispatcher core (heap, timeline, pool, clock, loop, shutdown) and its contract modules import no Django."""

import subprocess
import sys

CORE = [
    "scheduler_app.dispatcher.heap",
    "scheduler_app.dispatcher.timeline",
    "scheduler_app.dispatcher.pool",
    "scheduler_app.vocabulary.clock",
    "scheduler_app.dispatcher.loop",
    "scheduler_app.dispatcher.window",
    "scheduler_app.dispatcher.shutdown",
    "scheduler_app.dispatcher.gate",
    # What a worker process runs first (and the supervisor uses): pure, so it binds before Django.
    "scheduler_app.runtime.lifeline",
    # What a task raises to snooze, exported by the package without Django.
    "scheduler_app.vocabulary.endings",
    # The contract between the loop and its store: value types, retry
    # policy, wake-up message, the Store protocol.
    "scheduler_app.vocabulary.jobs",
    "scheduler_app.vocabulary.policy",
    "scheduler_app.vocabulary.wakeup",
    "scheduler_app.dispatcher.protocol",
    "scheduler_app.vocabulary.tallies",
    "scheduler_app.dispatcher.rollups",
]


def test_core_modules_do_not_import_django():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + "from scheduler_app import Snooze, options\n"
        + "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        + "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
