"""The dispatcher's window of pending jobs: which job is due next, which groups have due jobs.

Waiting entries sit in an indexed heap ordered by (execute_at, -priority,
id); ``promote(now)`` moves the due ones into a due heap per queue, ordered
as the database claims (priority desc, execute_at, id). ``take_due`` merges
a slot group's queues to hand the loop its best due entries, whose ids the
loop then claims; the claim's compare-and-set still decides which of them
run (an entry may be stale).

The window holds entries up to ``edge``: ``now + horizon`` after a complete
load, or the time of the last entry loaded when the load hit the cap (then
``truncated`` is set and the dispatcher reloads when time reaches the edge).
The number of entries never exceeds ``cap``.
"""

import math
from dataclasses import dataclass

from .heap import IndexedHeap


@dataclass(frozen=True, slots=True)
class Entry:
    """A pending job as the dispatcher mirrors it (or a schedule's next run: ``id`` is a ScheduleKey)."""

    id: int  # the job's id (a ScheduleKey for a schedule)
    at: float  # execute_at, epoch seconds (None in a schedule change: it has no next run)
    priority: int
    queue: str
    # Whether the job has a concurrency key: such jobs are claimed by the keyed
    # claim only (``claiming.Claimer``), so they wait apart from the others.
    keyed: bool = False


@dataclass(frozen=True, slots=True)
class ScheduleKey:
    """The timeline's key of a schedule's next run: never equal to a job's id, ordered before one at a tie."""

    schedule_id: int

    def __lt__(self, other):
        return self.schedule_id < other.schedule_id if isinstance(other, ScheduleKey) else True

    def __gt__(self, other):
        return self.schedule_id > other.schedule_id if isinstance(other, ScheduleKey) else False


# Schedules share the timeline with jobs: an entry per enabled schedule, at its
# next run, keyed by its ScheduleKey, in this pseudo-queue (and pseudo-group).
SCHEDULES = "__schedules__"


def schedule_entry(schedule_id, at):
    """Return the timeline entry of a schedule's next run (``at`` None: it has none)."""
    return Entry(ScheduleKey(int(schedule_id)), at, 0, SCHEDULES)


class Timeline:
    """Pending jobs with execute_at up to the edge, for the queues one dispatcher serves."""

    def __init__(self, group_of, cap):
        self._group_of = group_of  # queue name -> group name, or None if not served
        self.cap = cap
        self._waiting = IndexedHeap()  # by (execute_at, -priority, id)
        self._due = {}  # queue -> IndexedHeap by (-priority, execute_at, id): claim order
        self._due_queue = {}  # id -> queue, for due entries
        # Jobs with a concurrency key, per group, by (execute_at, -priority, id):
        # the keyed claim asks the database for them by query when one is due.
        self._keyed = {}  # group -> IndexedHeap
        self._keyed_group = {}  # id -> group
        self.edge = -math.inf
        self.truncated = False

    def __len__(self):
        return len(self._waiting) + len(self._due_queue) + len(self._keyed_group)

    def __contains__(self, job_id):
        return job_id in self._waiting or job_id in self._due_queue or job_id in self._keyed_group

    def reload(self, entries, *, edge, truncated, now=None):
        """Replace the whole window with ``entries`` (at most ``cap`` of them); those due at ``now`` (if given)
        go straight to their due heaps, as ``promote(now)`` would move them.

        The same window as an ``upsert`` of each (the last of an id wins), built
        with one heapify per heap: a backlog beyond the cap reloads thousands of
        entries, all due, several times while it is worked off.
        """
        self._waiting.clear()
        self._due.clear()
        self._due_queue.clear()
        self._keyed.clear()
        self._keyed_group.clear()
        self.edge = edge
        self.truncated = truncated
        waiting, due = [], {}
        for entry in {entry.id: entry for entry in entries[: self.cap]}.values():
            group = self._group_of(entry.queue)
            if group is None or entry.at > edge:
                continue
            if entry.keyed:
                self._upsert_keyed(entry, group)
            elif now is not None and entry.at <= now:
                due.setdefault(entry.queue, []).append((entry.id, (-entry.priority, entry.at), entry))
                self._due_queue[entry.id] = entry.queue
            else:
                waiting.append((entry.id, (entry.at, -entry.priority), entry))
        self._waiting.extend(waiting)
        for queue, items in due.items():
            heap = self._due[queue] = IndexedHeap()
            heap.extend(items)

    def upsert(self, entry):
        """Add or move an entry; return whether the window keeps it."""
        group = self._group_of(entry.queue)
        if group is None or entry.at > self.edge:
            self.remove(entry.id)
            return False
        if entry.keyed or entry.id in self._keyed_group:
            return self._upsert_keyed(entry, group)
        queue = self._due_queue.get(entry.id)
        known = self._waiting.get(entry.id) if queue is None else self._due[queue].get(entry.id)
        if known == entry:
            # Unchanged (a change poll re-reads its overlap): nothing to move.
            return True
        self._remove_due(entry.id)
        if entry.id not in self._waiting and len(self) >= self.cap:
            # Full: shrink the window to end just before this entry. A reload
            # at the new edge brings it (and anything else that was left out)
            # back before it is due.
            self.edge = min(self.edge, entry.at - 1e-6)
            self.truncated = True
            return False
        self._waiting.push(entry.id, (entry.at, -entry.priority), entry)
        return True

    def _upsert_keyed(self, entry, group):
        known_group = self._keyed_group.get(entry.id)
        if known_group is not None and self._keyed[known_group].get(entry.id) == entry:
            return True
        self.remove(entry.id)
        if not entry.keyed:
            return self.upsert(entry)
        if len(self) >= self.cap:
            self.edge = min(self.edge, entry.at - 1e-6)
            self.truncated = True
            return False
        heap = self._keyed.get(group)
        if heap is None:
            heap = self._keyed[group] = IndexedHeap()
        heap.push(entry.id, (entry.at, -entry.priority), entry)
        self._keyed_group[entry.id] = group
        return True

    def remove(self, job_id):
        """Forget an id; return whether it was there."""
        if self._waiting.remove(job_id) is not None:
            return True
        group = self._keyed_group.pop(job_id, None)
        if group is not None:
            heap = self._keyed[group]
            heap.remove(job_id)
            if not heap:
                del self._keyed[group]
            return True
        return self._remove_due(job_id)

    def keyed_due(self, now):
        """Return the groups with an entry of a keyed job due at ``now``."""
        return {group for group, heap in self._keyed.items() if heap.peek()[0][0] <= now}

    def keyed_next_at(self, now, skip=()):
        """Return the earliest time after ``now`` a keyed entry of a group not in ``skip`` is due, or None."""
        times = [
            heap.peek()[0][0] for group, heap in self._keyed.items() if group not in skip and heap.peek()[0][0] > now
        ]
        return min(times) if times else None

    def drop_keyed_due(self, group, now):
        """Forget the keyed entries of ``group`` due at ``now`` (the database had no more of them); return how many."""
        heap = self._keyed.get(group)
        dropped = 0
        while heap and heap.peek()[0][0] <= now:
            _, job_id, _ = heap.pop()
            del self._keyed_group[job_id]
            dropped += 1
        if heap is not None and not heap:
            del self._keyed[group]
        return dropped

    def _remove_due(self, job_id):
        queue = self._due_queue.pop(job_id, None)
        if queue is None:
            return False
        heap = self._due[queue]
        heap.remove(job_id)
        if not heap:
            del self._due[queue]
        return True

    def promote(self, now):
        """Move entries due at ``now`` into their queue's due heap; return the groups with due entries."""
        waiting = self._waiting
        while waiting:
            (at, _), job_id, entry = waiting.peek()
            if at > now:
                break
            waiting.pop()
            heap = self._due.get(entry.queue)
            if heap is None:
                heap = self._due[entry.queue] = IndexedHeap()
            heap.push(job_id, (-entry.priority, entry.at), entry)
            self._due_queue[job_id] = entry.queue
        return {self._group_of(q) for q in self._due}

    def next_at(self):
        """Return the time of the earliest waiting entry, or None."""
        top = self._waiting.peek()
        return None if top is None else top[0][0]

    def _group_queues(self, group, skip=()):
        return [q for q in self._due if self._group_of(q) == group and q not in skip]

    def due_count(self, group):
        return sum(len(self._due[q]) for q in self._group_queues(group))

    def has_due(self, skip=(), only=None):
        """Return whether any queue outside ``skip`` (paused ones), and in ``only`` if given, has due entries."""
        return any(q not in skip and (only is None or q in only) for q in self._due)

    def due_queues(self):
        """Return the queues that have due entries."""
        return set(self._due)

    def due_ids(self, group):
        return [job_id for q in self._group_queues(group) for job_id in self._due[q].ids()]

    def take_schedules(self):
        """Remove the due schedule entries; return their schedules' ids."""
        heap = self._due.pop(SCHEDULES, None)
        if heap is None:
            return []
        keys = heap.ids()
        for key in keys:
            del self._due_queue[key]
        return [key.schedule_id for key in keys]

    def take_due(self, group, n, skip=()):
        """Remove and return up to ``n`` due entries of ``group`` in claim order
        (priority, time, id), leaving queues in ``skip`` (paused) alone."""
        queues = self._group_queues(group, skip)
        if len(queues) == 1:
            # One queue with due entries (the common case): its heap's order is the claim order.
            [queue] = queues
            heap = self._due[queue]
            taken = heap.pop_values(n)
            due_queue = self._due_queue
            for entry in taken:
                del due_queue[entry.id]
            if not heap:
                del self._due[queue]
            return taken
        taken = []
        while queues and len(taken) < n:
            best = min(queues, key=lambda q: (self._due[q].peek()[0], self._due[q].peek()[1]))
            _, job_id, entry = self._due[best].pop()
            del self._due_queue[job_id]
            taken.append(entry)
            if not self._due[best]:
                del self._due[best]
                queues.remove(best)
        return taken

    def drop_due(self, group, skip=()):
        """Forget the due entries of ``group`` (a short claim proved them stale), but those of
        queues in ``skip`` (claimed otherwise, or not at all for now); return how many."""
        dropped = 0
        for queue in self._group_queues(group, skip):
            for job_id in self._due.pop(queue).ids():
                del self._due_queue[job_id]
                dropped += 1
        return dropped
