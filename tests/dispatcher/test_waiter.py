"""The loop's Waiter: an Event for the loop thread that also watches the LISTEN socket."""

import os
import socket
import threading
import time

import pytest

from scheduler_app.dispatcher.waiter import Waiter


class SocketSource:
    """A Waiter source over a socket pair: what the test sends is 'a notification'."""

    def __init__(self):
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.received = []
        self.deliver = None
        self.timeouts = []

    def fileno(self):
        return self.ours.fileno()

    def before_wait(self, timeout):
        self.timeouts.append(timeout)
        return timeout

    def read(self):
        data = self.ours.recv(100)
        self.received.append(data)
        self.deliver()


def test_set_from_another_thread_wakes_a_wait():
    waiter = Waiter()
    threading.Timer(0.05, waiter.set).start()
    assert waiter.wait(30) is True
    waiter.clear()
    assert not waiter.is_set()
    assert waiter.wait(0) is False  # the drained byte does not wake it again
    waiter.close()


def test_a_set_between_clear_and_wait_is_not_lost():
    waiter = Waiter()
    waiter.set()
    waiter.clear()
    waiter.set()
    started = time.monotonic()
    assert waiter.wait(30) is True
    assert time.monotonic() - started < 5  # returned at once, not at the timeout (hang guard)
    waiter.close()


def test_data_on_the_source_is_read_by_the_waiting_thread_and_wakes_it():
    source = SocketSource()
    waiter = Waiter(source)
    source.deliver = waiter.set
    readers = []
    original = source.read
    source.read = lambda: (readers.append(threading.current_thread()), original())
    threading.Timer(0.05, lambda: source.theirs.send(b"n")).start()
    assert waiter.wait(30) is True
    assert source.received == [b"n"] and readers == [threading.current_thread()]
    assert source.timeouts == [30]
    waiter.close()


def test_poll_source_reads_without_sleeping():
    source = SocketSource()
    waiter = Waiter(source)
    source.deliver = waiter.set
    source.theirs.send(b"x")
    time.sleep(0.01)
    waiter.poll_source()
    assert source.received == [b"x"] and waiter.is_set()
    waiter.close()


def test_a_wait_never_returns_before_its_timeout():
    waiter = Waiter()
    for timeout in (0.0005, 0.0015, 0.0123):
        started = time.monotonic()
        assert waiter.wait(timeout) is False
        assert time.monotonic() - started >= timeout
    waiter.close()


def test_set_after_close_writes_nothing():
    # A late set() (an abandoned worker thread returning after the loop
    # ended) must not write into a descriptor number reused since.
    waiter = Waiter()
    old_write = waiter._write_fd
    waiter.close()
    r, w = os.pipe()  # the lowest free numbers: the waiter's old ones
    try:
        if old_write not in (r, w):
            pytest.skip("the descriptor numbers were not reused (another thread opened files)")
        waiter.set()
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 10)
    finally:
        os.close(r)
        os.close(w)
