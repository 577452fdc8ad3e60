"""Run ``manage.py rundispatcher`` and say where a claim cycle's time goes (bench instrumentation only).

    DATABASE_URL=... .venv/bin/python bench/drivers/ours_dispatch_timed.py --concurrency 16 --burst

The app is not changed: this process wraps the loop's ``tick``, the
finish+claim statement and the loop's waits, and prints at exit, per
statement: its wall and CPU time, the tick's wall and CPU time (statement
included), and the time the loop waited (for the worker threads to end the
batch). One line on stderr, starting ``INST``.
"""

import atexit
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.drivers.common import setup_django

setup_django("bench.settings_ours")
# Django is set up before these are imported.
from django.core.management import execute_from_command_line  # noqa: E402

from scheduler_app.dispatcher import loop as L  # noqa: E402
from scheduler_app.sql import dialect as D  # noqa: E402
from scheduler_app.sql import postgres as P  # noqa: E402

st = collections.Counter()
_tick = L.Dispatcher.tick


def tick(self, now):
    t0, c0 = time.perf_counter(), time.thread_time()
    r = _tick(self, now)
    st["tick_wall"] += time.perf_counter() - t0
    st["tick_cpu"] += time.thread_time() - c0
    st["ticks"] += 1
    return r


L.Dispatcher.tick = tick
_fc = P.pg_finish_and_claim


def fc(*a, **k):
    t0, c0 = time.perf_counter(), time.thread_time()
    won, rows = _fc(*a, **k)
    st["stmt_wall"] += time.perf_counter() - t0
    st["stmt_cpu"] += time.thread_time() - c0
    st["stmts"] += 1
    st["rows"] += len(rows)
    return won, rows


D.pg_finish_and_claim = fc  # what the PostgreSQL dialect calls
_run = L.Dispatcher.run


def run(self):
    ev = self._event
    _wait = ev.wait

    def wait(t=None):
        t0 = time.perf_counter()
        r = _wait(t)
        st["wait_wall"] += time.perf_counter() - t0
        st["waits"] += 1
        return r

    ev.wait = wait
    t0 = time.perf_counter()
    try:
        return _run(self)
    finally:
        st["run_wall"] += time.perf_counter() - t0


L.Dispatcher.run = run


@atexit.register
def dump():
    s = st
    n = max(s["stmts"], 1)
    print(
        f"INST stmts={s['stmts']} rows/stmt={s['rows'] / n:.1f} ticks={s['ticks']} waits={s['waits']} | per stmt: stmt wall {1e3 * s['stmt_wall'] / n:.3f} ms (cpu {1e3 * s['stmt_cpu'] / n:.3f}); tick wall {1e3 * s['tick_wall'] / n:.3f} (cpu {1e3 * s['tick_cpu'] / n:.3f}); wait {1e3 * s['wait_wall'] / n:.3f}; run {s['run_wall']:.2f}s",
        file=sys.stderr,
    )


execute_from_command_line(["manage.py", "rundispatcher", *sys.argv[1:]])
