"""Attempts handed back at shutdown: taking back the others', and letting ours go once no thread runs them.

A dispatcher that stops past its grace period hands its unfinished attempts
back (``store.release``); they stay unclaimable until nothing of it can
still run them (invariant 14: a thread cannot be killed). Then any
dispatcher takes them back (``store.take_back``): at once when a NOTIFY says
some were handed back, again soon while their dispatcher lives on (doubling
from ``RECHECK`` up to a heartbeat), and every heartbeat otherwise.
"""

import threading

RECHECK = 0.1


class HandBack:
    def __init__(self, store, pool, lease):
        self.store = store
        self.pool = pool
        self.interval = lease / 3
        # Loop thread only: when to look next (at once: a predecessor's jobs), and the delay after that.
        self.due = 0.0
        self._delay = RECHECK

    def told(self):
        """A dispatcher handed attempts back (a WakeUp said so): look at once."""
        self.due = 0.0
        self._delay = RECHECK

    def take_back(self, now):
        """Take back the jobs handed back by dispatchers now gone; look again soon while some still wait."""
        _, waiting = self.store.take_back(now)
        if waiting:
            self.due = now + self._delay
            self._delay = min(self._delay * 2, self.interval)
        else:
            self.due = now + self.interval
            self._delay = RECHECK

    def retire_when_done(self):
        """Tell the store once no thread of this dispatcher runs an attempt (``store.retire``).

        Until the threads of the attempts it handed back return, the store
        keeps this dispatcher alive for the others; a process that exits
        ends them, and the lock with them.
        """
        threads = self.pool.live_threads()
        if not threads:
            self.store.retire()
            return

        def retire():
            for thread in threads:
                thread.join()
            self.store.retire()

        threading.Thread(target=retire, name="scheduler-retire", daemon=True).start()
