"""lifeline: a process bound to its parent ends, with what it started, when the parent goes.

Real processes: a "parent" starts a "worker" that binds itself to it and starts a
``sleep``; the test kills the parent with SIGKILL and watches the other two go.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from scheduler_app.runtime import lifeline

# Independent of the database: runs once, in the SQLite pass.
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parents[2]

WORKER = """
import os, subprocess, sys, time
from scheduler_app.runtime import lifeline
if sys.argv[1] == "watchdog-only":  # as where there is no prctl (macOS, the BSDs)
    lifeline.parent_death_signal = lambda signum: False
lifeline.bind_to_parent(int(sys.argv[2]))
child = subprocess.Popen(["sleep", "60"])
print(os.getpid(), child.pid, flush=True)
time.sleep(60)
"""

PARENT = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], str(os.getpid())], stdout=subprocess.PIPE, text=True)
print(worker.stdout.readline().strip(), flush=True)
time.sleep(60)
"""


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_for(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
@pytest.mark.parametrize("mode", ["prctl", "watchdog-only"])
def test_a_bound_process_and_its_own_child_end_when_its_parent_is_killed(mode):
    if mode == "prctl" and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, WORKER, mode], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        worker, child = (int(pid) for pid in parent.stdout.readline().split())
        assert not gone(worker) and not gone(child)
        assert os.getpgid(worker) == worker and os.getpgid(child) == worker  # a group of its own, with its child
        parent.kill()
        parent.wait(10)
        # A hang guard (the watchdog looks every WATCH_INTERVAL), not a timing assertion.
        assert wait_for(lambda: gone(worker) and gone(child), timeout=10), (gone(worker), gone(child))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_a_process_whose_parent_died_before_it_bound_itself_ends_at_once():
    # It is told of a parent that is not its own: as if that one had died before the prctl.
    done = subprocess.run(
        [sys.executable, "-c", WORKER, "prctl", "1"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == -9 and done.stdout == "", (done.returncode, done.stdout, done.stderr)


def test_kill_group_signals_a_group_only_where_one_is_led():
    plain = subprocess.Popen(["sleep", "60"])  # in this process's group: it leads none
    leader = subprocess.Popen(["sleep", "60"], process_group=0)
    try:
        assert lifeline.kill_group(plain.pid) is False
        assert plain.poll() is None
        assert lifeline.kill_group(leader.pid) is True
        assert leader.wait(10) == -9
    finally:
        for process in (plain, leader):
            process.kill()
            process.wait(10)


SWEEPER = """
import os, subprocess, sys
from scheduler_app.runtime import lifeline
lifeline._prctl(lifeline.PR_SET_CHILD_SUBREAPER, 1)
child = subprocess.Popen(["sleep", "600"])
orphan = int(subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True).stdout)
ended = subprocess.Popen(["true"])
ended.wait()
listed = lifeline.children()
assert listed == lifeline._children_by_scan() == {child.pid, orphan}, (listed, lifeline._children_by_scan())
print(child.pid, orphan, lifeline.end_children(), sorted(lifeline.children()), flush=True)
"""


def test_end_children_kills_and_reaps_every_child_and_adopted_orphan_and_counts_them():
    sweeper = subprocess.Popen(
        [sys.executable, "-c", SWEEPER],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own: a hang leaves nothing behind
    )
    try:
        out, err = sweeper.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweeper.pid, signal.SIGKILL)
        sweeper.wait()
    assert sweeper.returncode == 0, err
    child, orphan, killed, left = out.split(maxsplit=3)
    assert (killed, left.strip()) == ("2", "[]")  # the one that had ended is not counted
    for pid in (int(child), int(orphan)):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
