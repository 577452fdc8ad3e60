"""Which limited queues the loop may ask the database for now, and until when the others wait.

The limits themselves are the database's (the claim counts and obeys them,
invariant 11); this only keeps the loop from asking again and again while a
queue is full. A claim that leaves a limited queue without room blocks it:

- until its rate window next has room, when the rate limit is what is full
  (the claim says when);
- otherwise until one of its running jobs ends: one of this dispatcher's
  (the loop frees the queue when it collects the outcome), another
  dispatcher's (a ``freed`` wake-up message), a change of the queue's
  limits, or at the latest ``retry_interval`` later (a job whose dispatcher
  died ends when a rescue takes it back, and says nothing).

Pure: no Django. Loop thread only.
"""


class Gate:
    # Seconds between two "freed" messages about one queue: a queue finishing
    # thousands of jobs a second tells the others ten times a second, not
    # with every batch (a NOTIFY each cost the limited claim a third of its
    # throughput).
    TELL_EVERY = 0.1

    def __init__(self, retry_interval=1.0):
        self.retry_interval = retry_interval
        self.limited = frozenset()  # queues with a limit, as last read from the store
        self._blocked = {}  # queue -> (until, waits for a running job to end)
        self._told = {}  # queue -> when others were last told that its jobs ended

    def update(self, limited):
        """Take the limited queues the store reported; unblock queues no longer limited."""
        self.limited = frozenset(limited)
        for queue in list(self._blocked):
            if queue not in self.limited:
                del self._blocked[queue]

    def block(self, queue, until, now):
        """Block ``queue`` until ``until`` (epoch), or (None) until a running job of it ends."""
        if until is None:
            self._blocked[queue] = (now + self.retry_interval, True)
        else:
            self._blocked[queue] = (max(until, now), False)

    def free(self, queues, *, only_concurrency=False):
        """Unblock ``queues``: room may have come back. ``only_concurrency`` leaves rate-blocked ones be."""
        for queue in queues:
            entry = self._blocked.get(queue)
            if entry is not None and (entry[1] or not only_concurrency):
                del self._blocked[queue]

    def blocked(self, now):
        """Return the queues still blocked at ``now`` (forgetting blocks that ran out)."""
        for queue, (until, _) in list(self._blocked.items()):
            if until <= now:
                del self._blocked[queue]
        return set(self._blocked)

    def to_tell(self, queues, now):
        """Return which of ``queues`` (their jobs ended) to tell other dispatchers about now, and note it."""
        told = {q for q in queues if now - self._told.get(q, float("-inf")) >= self.TELL_EVERY}
        for queue in told:
            self._told[queue] = now
        return told

    def next_moment(self, queues):
        """Return the earliest time one of ``queues`` (those with due jobs) unblocks, or None."""
        times = [self._blocked[q][0] for q in queues if q in self._blocked]
        return min(times) if times else None
