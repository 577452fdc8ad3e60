"""The guardian process (``runtime/guardian.py``): it kills its dispatcher when an armed moment passes."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from scheduler_app.runtime import guardian


def watching(pid=12345):
    """Run ``guardian.watch`` on a pipe in a thread; return (write end, kills, result holder, thread)."""
    read, write = os.pipe()
    kills, result = [], []
    thread = threading.Thread(
        target=lambda: result.append(guardian.watch(pid, read, kill=lambda p, s: kills.append((p, s)))), daemon=True
    )
    thread.start()
    return write, kills, result, thread


def test_an_armed_moment_that_passes_kills_the_dispatcher():
    write, kills, result, thread = watching()
    os.write(write, f"{time.monotonic() + 0.05!r}\n".encode())
    thread.join(10)
    assert kills == [(12345, signal.SIGKILL)] and result == ["killed"]


def test_a_moved_or_disarmed_moment_kills_nothing_and_the_end_of_the_pipe_ends_it():
    write, kills, result, thread = watching()
    os.write(write, f"{time.monotonic() + 0.05!r}\n".encode())
    os.write(write, f"{time.monotonic() + 3600!r}\n".encode())  # renewed
    os.write(write, f"{time.monotonic() + 0.05!r}\n-\n".encode())  # then nothing in flight
    os.close(write)
    thread.join(10)
    assert kills == [] and result == ["closed"]


@pytest.mark.slow
def test_the_guardian_process_kills_a_stopped_process_and_ends_with_its_dispatcher():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watcher = subprocess.Popen([sys.executable, "-I", guardian.__file__, str(victim.pid)], stdin=subprocess.PIPE)
        victim.send_signal(signal.SIGSTOP)
        watcher.stdin.write(f"{time.monotonic() + 0.2!r}\n".encode())
        watcher.stdin.flush()
        assert victim.wait(10) == -signal.SIGKILL
        assert watcher.wait(10) == 0
    finally:
        victim.kill()
    # A disarmed guardian ends when its pipe closes, and kills nothing.
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watcher = subprocess.Popen([sys.executable, "-I", guardian.__file__, str(survivor.pid)], stdin=subprocess.PIPE)
        watcher.stdin.write(b"-\n")
        watcher.stdin.close()
        assert watcher.wait(10) == 0
        assert survivor.poll() is None  # the guardian has ended: it never will kill it
    finally:
        survivor.kill()
        survivor.wait()
