"""The dispatcher's window: the timeline, kept in step with the database.

Three ways keep it right (invariant 9): a full load of the window (at start,
every ``full_sync_interval``, and when a truncated window runs out), a change
poll every ``poll_interval`` (``updated_at`` since the watermark, reaching
back ``sync_overlap`` for late commits), and wake-up messages applied as they
arrive. Any entry may be stale: the claim's compare-and-set decides.

Pure: the store is passed in. Loop thread only.
"""

import math

from .timeline import Entry, schedule_entry


class Window:
    def __init__(self, timeline, queues, *, horizon, poll_interval, full_sync_interval, sync_overlap):
        self.timeline = timeline
        self.queues = queues
        self.horizon = horizon
        self.poll_interval = poll_interval
        # The window slides by reloading; reload at least twice per horizon.
        self.full_sync_interval = min(full_sync_interval, max(horizon / 2, 0.1))
        self.sync_overlap = sync_overlap
        self.watermark = None  # the time of the last poll or reload
        self.due_poll = 0.0
        self.due_full = 0.0
        self.need_poll = False
        self._edge_was_ahead = False

    def apply(self, entry):
        """Upsert an entry; a schedule entry without a time leaves the window."""
        if entry.at is None:
            self.timeline.remove(entry.id)
        else:
            self.timeline.upsert(entry)

    def apply_message(self, message):
        """Apply a WakeUp's jobs, removals and schedules (the loop handles the rest)."""
        if message.sync:
            self.need_poll = True
        for job_id, at, priority, queue, *keyed in message.jobs:
            self.timeline.upsert(Entry(job_id, at, priority, queue, bool(keyed)))
        for job_id in message.removed:
            self.timeline.remove(job_id)
        for schedule_id, at in message.schedules:
            self.apply(schedule_entry(schedule_id, at))

    def sync(self, store, now):
        """Reload or poll if one is due."""
        if now >= self.due_full or self._exhausted(now):
            self.reload(store, now)
        elif self.need_poll or now >= self.due_poll:
            self.poll(store, now)

    def _exhausted(self, now):
        """Return whether a truncated window needs reloading now.

        At once when it has drained to half the cap (a backlog being worked
        off); when time passes its edge, at most once per poll interval (jobs
        beyond the edge may be due).
        """
        tl = self.timeline
        if not tl.truncated:
            return False
        # An edge already past at load time means the window is all due
        # jobs of a backlog; claims go by query then, and re-reading the same
        # rows every poll would only burn time (the backlog drains the window).
        edge_passed = self._edge_was_ahead and now >= tl.edge and now >= self.due_poll
        return len(tl) < tl.cap // 2 or edge_passed

    def reload(self, store, now):
        until = now + self.horizon
        entries = store.load_window(self.queues, until, self.timeline.cap)
        truncated = len(entries) >= self.timeline.cap
        edge = entries[-1].at if truncated else until
        self.timeline.reload(entries, edge=edge, truncated=truncated, now=now)
        self._edge_was_ahead = edge > now
        self.watermark = now
        self.need_poll = False
        self.due_full = now + self.full_sync_interval
        self.due_poll = now + self.poll_interval

    def poll(self, store, now):
        since = (self.watermark if self.watermark is not None else now) - self.sync_overlap
        entries = store.changes(self.queues, since, self.timeline.cap)
        if entries is None:
            # More jobs changed than the window can hold: read the window
            # afresh (at most cap rows) instead of every change.
            self.reload(store, now)
            return
        for entry in entries:
            self.apply(entry)
        # The window is in step with the database as of now, as after a
        # reload: the next poll reaches back sync_overlap behind this one.
        # Moved only to the newest change seen, the watermark stood still
        # once changes stopped, and every poll re-read every job changed
        # within the overlap of the last change until it was claimed: after
        # a bulk enqueue all of them, at every poll, or a whole reload when
        # they outnumbered the cap. (Nor can a change time from the future,
        # a clock ahead or a row written around the service, move it past
        # now: polls would then miss every change until then.)
        self.watermark = now
        self.need_poll = False
        self.due_poll = now + self.poll_interval

    def moments(self, *, claiming=True):
        """Return the times this window next needs the loop: poll, reload and, while claiming,
        the earliest waiting entry and the edge of a truncated window."""
        moments = [self.due_poll, self.due_full]
        if claiming:
            tl = self.timeline
            next_at = tl.next_at()
            if next_at is not None:
                moments.append(next_at)
            if tl.truncated and math.isfinite(tl.edge):
                moments.append(max(tl.edge, self.due_poll))
        return moments
