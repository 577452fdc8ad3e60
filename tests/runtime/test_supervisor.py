"""The supervisor's restart rules, with fake processes and a fake clock (the real ones:
tests/runtime/test_supervisor_processes.py)."""

import logging
import signal

import pytest

from scheduler_app.runtime import supervisor as sup

# Independent of the database: runs once, in the SQLite pass.
pytestmark = pytest.mark.once


class FakeProcess:
    pids = iter(range(1000, 10**6))

    def __init__(self):
        self.pid = next(self.pids)
        self.code = None
        self.sent = []

    def poll(self):
        return self.code

    def send_signal(self, signum):
        self.sent.append(signum)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def fake(monkeypatch):
    clock = Clock()
    supervisor = sup.Supervisor(["true"], 2, clock=clock)
    started = []

    def start(child):
        child.process = FakeProcess()
        child.started = clock()
        started.append((child.number, clock()))

    monkeypatch.setattr(supervisor, "_start", start)
    supervisor.start()
    return supervisor, clock, started


def die(child, code=1):
    child.process.code = code


def test_a_child_that_keeps_dying_early_waits_twice_as_long_each_time_up_to_the_cap(fake, caplog):
    supervisor, clock, started = fake
    first = supervisor.children[0]
    waits = []
    with caplog.at_level(logging.WARNING, logger=sup.__name__):
        for _ in range(8):
            die(first, 3)
            supervisor._reap(restart=True)
            assert first.process is None  # not at once: after its backoff
            waits.append(first.restart_at - clock.now)
            clock.now = first.restart_at - 0.01
            supervisor._reap(restart=True)
            assert first.process is None
            clock.now = first.restart_at
            assert supervisor._reap(restart=True) == 2
            assert first.process is not None
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert "exited with exit code 3 after 0.0s; restarting in 1.0s" in caplog.text
    assert [number for number, _ in started].count(2) == 1  # the other one, alive, was left alone


def test_a_child_that_lived_a_minute_restarts_after_the_minimum_again(fake):
    supervisor, clock, _ = fake
    child = supervisor.children[0]
    for _ in range(3):  # 1, 2, 4: the next wait would be 8 s
        die(child)
        supervisor._reap(restart=True)
        clock.now = child.restart_at
        supervisor._reap(restart=True)
    clock.now += sup.HEALTHY_AFTER
    die(child, -signal.SIGKILL)
    supervisor._reap(restart=True)
    assert child.restart_at - clock.now == sup.RESTART_BACKOFF_MIN


def test_after_a_stop_signal_nothing_is_restarted_and_the_signal_is_passed_on_once(fake):
    supervisor, clock, _ = fake
    a, b = (c.process for c in supervisor.children)
    supervisor.signal()
    supervisor._pass_on(signal.SIGTERM)
    assert a.sent == b.sent == [signal.SIGTERM]
    a.code = 0
    assert supervisor._reap(restart=False) == 1
    clock.now += 100
    assert supervisor._reap(restart=False) == 1 and supervisor.children[0].process is None
    b.code = -signal.SIGTERM
    assert supervisor._reap(restart=False) == 0


def test_finite_children_that_end_with_0_are_done_and_others_restart(monkeypatch):
    clock = Clock()
    supervisor = sup.Supervisor(["true"], 2, clock=clock, finite=True)
    monkeypatch.setattr(supervisor, "_start", lambda child: setattr(child, "process", FakeProcess()))
    supervisor.start()
    done, failed = supervisor.children
    done.process.code = 0
    failed.process.code = 1
    supervisor._reap(restart=True)
    assert done.process is None and done.restart_at == float("inf")
    clock.now = failed.restart_at
    assert supervisor._reap(restart=True) == 1 and failed.process is not None


@pytest.mark.parametrize(
    ("code", "text"), [(0, "exit code 0"), (2, "exit code 2"), (-9, "signal SIGKILL"), (-15, "signal SIGTERM")]
)
def test_exit_status_in_words(code, text):
    assert sup._status(code) == text
