"""Signal handling for the dispatcher: the first SIGTERM/SIGINT stops gracefully, the second at once."""

import contextlib
import logging
import os
import signal
import threading

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def graceful_signals(stop, *, signals=(signal.SIGTERM, signal.SIGINT)):
    """Install handlers that call ``stop()`` once, then exit at once; restore the old ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed on the main thread
        return
    received = []

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
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
