"""PostgreSQL LISTEN on the scheduler's channel, on a thread with its own connection."""

import logging
import threading

import psycopg

from . import pg
from .wakeup import WakeUp

logger = logging.getLogger(__name__)


class PgListener(threading.Thread):
    """Hand every NOTIFY payload to ``deliver`` as a WakeUp; after a (re)connect ask for a sync."""

    # Seconds between looks at the stop flag while no notification comes:
    # how long stop() may take to end the thread.
    STOP_CHECK = 0.5

    def __init__(self, deliver, channel, using="default"):
        super().__init__(name="scheduler-listener", daemon=True)
        self.deliver = deliver
        self.channel = channel
        self.using = using
        self._stopped = threading.Event()
        self.connected = threading.Event()

    def stop(self):
        self._stopped.set()

    def run(self):
        backoff = 0.25
        while not self._stopped.is_set():
            try:
                with pg.connect(self.using) as conn:
                    conn.execute(f"LISTEN {psycopg.sql.Identifier(self.channel).as_string(conn)}")
                    self.connected.set()
                    backoff = 0.25
                    # Anything sent while we were not listening is found by a sync.
                    self.deliver(WakeUp(sync=True, queues_changed=True))
                    while not self._stopped.is_set():
                        for note in conn.notifies(timeout=self.STOP_CHECK):
                            self.deliver(WakeUp.decode(note.payload))
            except psycopg.Error as exc:
                self.connected.clear()
                if self._stopped.is_set():
                    return
                logger.warning("LISTEN connection lost (%s); reconnecting in %.2fs", exc, backoff)
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, 10.0)
