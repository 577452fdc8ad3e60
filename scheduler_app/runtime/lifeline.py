"""A worker process dies with its dispatcher, and so do the processes its task started.

Linux first. A worker process (``processes.py``), first thing after it
starts (before Django's setup):

* becomes the leader of a process group of its own (``setpgid(0, 0)``):
  whatever its task starts (``subprocess``, a ``multiprocessing`` fork) is
  in that group, so one ``killpg`` ends the worker and all of it;
* asks the kernel for ``PARENT_GONE`` when its parent goes
  (``prctl(PR_SET_PDEATHSIG)``; the kernel sends it when the *thread* that
  started the process ends, which is why the dispatcher starts its workers
  from one long-lived thread), whose handler kills the whole group with
  SIGKILL; then checks ``getppid()`` once, as the parent may have died
  before the ``prctl``;
* runs a watchdog thread that polls ``getppid()`` every ``WATCH_INTERVAL``
  and kills the group when the parent changed: the only guard where there
  is no ``prctl`` (macOS, the BSDs), and a second one where a task's own
  handler replaced the signal's.

The dispatcher, when it kills a worker (a timeout, a release, a stop), kills
its group the same way (``kill_group``). Limits: a process the task starts
in a session or group of its own (``setsid``, ``start_new_session=True``,
``setpgid``) leaves the group and is not followed; without ``prctl`` the
watchdog needs the GIL, so a task that holds it in C code delays it.

Between two attempts nothing of the first runs on: the worker is a child
subreaper (``PR_SET_CHILD_SUBREAPER``: the orphans of its descendants, in
its group or not, become its children), and when an attempt ends it kills
and reaps its children until none is left (``end_children``), before it
reports the outcome. Linux; elsewhere it only reaps the children that ended.

Pure: no Django (the supervisor uses ``parent_death_signal`` too).
"""

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# The parent-death signal. Not SIGTERM/SIGINT: a service manager that signals
# every process of the unit (systemd) must not cut the grace period short.
PARENT_GONE = signal.SIGHUP
WATCH_INTERVAL = 0.5  # seconds between the watchdog's looks at getppid()


def _prctl(option, value):
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, int(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_death_signal(signum):
    """Linux: have the kernel send this process ``signum`` when its parent thread ends; return whether it will."""
    return _prctl(PR_SET_PDEATHSIG, signum)


def children():
    """Return the pids of this process's children (Linux; an empty set elsewhere)."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return set()  # no /proc
    if not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children"):
        return _children_by_scan()  # a kernel without CONFIG_PROC_CHILDREN
    pids = set()
    for tid in threads:  # a child is listed under the thread that forked (or adopted) it
        # OSError: that thread ended meanwhile
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as fh:
            pids.update(int(pid) for pid in fh.read().split())
    return pids


def _children_by_scan():
    me, pids = os.getpid(), set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
                if int(fields[1]) == me:
                    pids.add(int(name))
    return pids


def end_children(rounds=100):
    """Kill (SIGKILL) and reap this process's children, and the orphans it adopts meanwhile; return how many it killed.

    Only its own unreaped children are signalled: their pids cannot have
    been reused.
    """
    killed = 0
    for _ in range(rounds):
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # reap the children that ended
        except ChildProcessError:
            return killed  # none left
        running = children()
        if not running:
            return killed  # they cannot be listed here
        for pid in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in running:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        killed += len(running)
    return killed


def kill_group(pid, signum=signal.SIGKILL):
    """Send ``signum`` to the process group that ``pid`` leads; return False if there is none.

    Call it before ``pid`` is reaped: until then the id cannot be reused. A
    worker that has not made its group yet has none (the caller then
    signals the process alone).
    """
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _end_own_group(*_):
    """Kill this process's group (this process included); only this process if it leads no group."""
    pid = os.getpid()
    if os.getpgrp() == pid:
        os.killpg(pid, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def _watch(parent_pid):
    while True:
        time.sleep(WATCH_INTERVAL)
        if os.getppid() != parent_pid:
            _end_own_group()


def bind_to_parent(parent_pid):
    """Make this (worker) process a group leader that ends, with its group, when ``parent_pid`` ends.

    Main thread only (it installs a signal handler).
    """
    with contextlib.suppress(OSError):  # EPERM if it leads a session already: then it keeps its group
        os.setpgid(0, 0)
    # A group of its own is a background group of the terminal's session: a
    # write to the terminal under ``stty tostop`` must not stop the worker.
    for job_control in (signal.SIGTTOU, signal.SIGTTIN):
        signal.signal(job_control, signal.SIG_IGN)
    signal.signal(PARENT_GONE, _end_own_group)
    parent_death_signal(PARENT_GONE)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # what a task leaves running stays within reach: end_children
    if os.getppid() != parent_pid:  # it died before the prctl: no signal is coming
        _end_own_group()
    threading.Thread(target=_watch, args=(parent_pid,), name="scheduler-parent-watch", daemon=True).start()
