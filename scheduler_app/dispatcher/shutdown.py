"""Signal handling for the dispatcher: the first SIGTERM/SIGINT stops gracefully, the second at once.

Signals are handled from the first moment the command's code runs: the app
installs an early handler while Django starts (``install_early``), the
command takes over with ``graceful_signals`` before it builds anything, and
a stop that arrives before the dispatcher exists is kept by a
``StopRequest`` and handed on when it does.
"""

import contextlib
import logging
import os
import signal
import threading

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """A ``stop()`` that may come before its target exists; safe from any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._target = None
        self.requested = False

    def __call__(self):
        with self._lock:
            self.requested = True
            target = self._target
        if target is not None:
            target()

    def attach(self, stop):
        """Forward to ``stop`` from now on (and at once if a stop came already)."""
        with self._lock:
            self._target = stop
            requested = self.requested
        if requested:
            stop()


# Signals that arrive while Django starts, before the command runs.
_early = {"signals": []}


def install_early(signals=SIGNALS):
    """Remember SIGTERM/SIGINT until ``graceful_signals`` takes over (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def remember(signum, frame):
        _early["signals"].append(signum)
        if len(_early["signals"]) > 1:
            os._exit(1)

    for s in signals:
        signal.signal(s, remember)


def hold_signals_for_dispatcher(argv):
    """When ``argv`` runs ``rundispatcher``, hold SIGTERM/SIGINT until the dispatcher takes them.

    Call it first thing in ``manage.py`` (before Django loads) so a stop sent
    at any moment of the start is a graceful stop; the app calls it again
    once Django's apps are ready (harmless twice).
    """
    if argv[1:2] == ["rundispatcher"]:
        install_early()


def early_signals():
    """Return the signals that arrived while Django started (before a handler took over)."""
    return list(_early["signals"])


@contextlib.contextmanager
def graceful_signals(stop, *, signals=SIGNALS):
    """Install handlers that call ``stop()`` once, then exit at once; restore the old ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed on the main thread
        return
    received = list(_early["signals"])

    def graceful(name):
        logger.info("received %s: stopping gracefully (send again to exit at once)", name)
        stop()

    def handler(signum, frame):
        # A handler runs on the main thread between two bytecodes, possibly
        # while that thread holds the very lock stop() needs (the loop's
        # Event, a logging stream): touching either here can deadlock. So it
        # only records the signal and hands the work to a short-lived thread.
        received.append(signum)
        if len(received) == 1:
            name = signal.Signals(signum).name
            threading.Thread(target=graceful, args=(name,), name="scheduler-stop", daemon=True).start()
        else:
            os._exit(1)

    previous = {s: signal.signal(s, handler) for s in signals}
    if received:
        graceful(signal.Signals(received[0]).name)  # it came while Django started
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
