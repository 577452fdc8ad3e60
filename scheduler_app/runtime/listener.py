"""PostgreSQL LISTEN on the scheduler's channel, read by the loop thread itself.

The connection is the loop's ``Waiter`` source (``waiter.py``): the loop
sleeps on its socket and reads the notifications when it wakes, so a NOTIFY
reaches the loop with one thread wake-up, not two. Only the loop thread
touches the connection. A lost connection is reopened from the loop's
wait, with backoff (0.25 s doubling to 10 s); after every (re)connect the
loop is asked for a full sync, which finds whatever was sent meanwhile.
"""

import logging
import threading
import time

import psycopg

from ..sql import connections
from ..vocabulary.wakeup import WakeUp

logger = logging.getLogger(__name__)

# Seconds a (re)connect may take before it counts as failed: the loop
# thread waits for it.
CONNECT_TIMEOUT = 5


class LoopListener:
    """Deliver every NOTIFY payload on ``channel`` to ``deliver`` as a WakeUp."""

    def __init__(self, deliver, channel, using="default"):
        self.deliver = deliver
        self.channel = channel
        self.using = using
        self.connected = threading.Event()  # for tests and the banner: LISTEN is in place
        self._conn = None
        self._retry_at = 0.0
        self._backoff = 0.25
        self._stopped = False

    def start(self):
        """Connect and LISTEN now (on the caller's thread); on failure the loop retries."""
        self._connect()

    def stop(self):
        self._stopped = True
        self._close()

    # -- the Waiter's source interface (loop thread) -------------------------

    def fileno(self):
        conn = self._conn
        return None if conn is None else conn.fileno()

    def before_wait(self, timeout):
        if self._conn is not None or self._stopped:
            return timeout
        now = time.monotonic()
        if now >= self._retry_at:
            self._connect()
            if self._conn is not None:
                return 0.0  # the sync it asked for is waiting in the inbox
        remaining = max(0.0, self._retry_at - time.monotonic())
        return remaining if timeout is None else min(timeout, remaining)

    def read(self):
        conn = self._conn
        if conn is None:
            return
        try:
            for note in conn.notifies(timeout=0):
                self.deliver(WakeUp.decode(note.payload))
        except psycopg.Error as exc:
            self._lost(exc)

    # -- internals -------------------------------------------------------------

    def _connect(self):
        if self._stopped:
            return
        try:
            conn = connections.connect(self.using, connect_timeout=CONNECT_TIMEOUT)
            conn.execute(f"LISTEN {psycopg.sql.Identifier(self.channel).as_string(conn)}")
        except psycopg.Error as exc:
            self._lost(exc)
            return
        self._conn = conn
        self._backoff = 0.25
        self.connected.set()
        # Anything sent while we were not listening is found by a sync.
        self.deliver(WakeUp(sync=True, queues_changed=True))

    def _lost(self, exc):
        self._close()
        if self._stopped:
            return
        logger.warning("LISTEN connection lost (%s); reconnecting in %.2fs", exc, self._backoff)
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, 10.0)

    def _close(self):
        conn, self._conn = self._conn, None
        self.connected.clear()
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
