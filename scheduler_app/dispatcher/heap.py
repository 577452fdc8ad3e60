"""An indexed binary min-heap: O(log n) push, pop, remove and re-key by id.

Each id's position is kept in a dict (NSQ's trick, seed 003), so a cancelled
or rescheduled job is removed or moved without a scan and without leaving a
tombstone behind.
"""


class IndexedHeap:
    """A min-heap of ``(key, id, value)`` items with at most one item per id."""

    __slots__ = ("_items", "_pos")

    def __init__(self):
        self._items = []  # [key, id, value] lists, heap-ordered by (key, id)
        self._pos = {}  # id -> index in _items

    def __len__(self):
        return len(self._items)

    def __contains__(self, item_id):
        return item_id in self._pos

    def ids(self):
        """Return the ids held, in no particular order."""
        return list(self._pos)

    def get(self, item_id, default=None):
        index = self._pos.get(item_id)
        return default if index is None else self._items[index][2]

    def push(self, item_id, key, value=None):
        """Insert, or re-key and replace the value of an existing id."""
        index = self._pos.get(item_id)
        if index is not None:
            item = self._items[index]
            old = item[0]
            item[0], item[2] = key, value
            if (key, item_id) < (old, item_id):
                self._up(index)
            else:
                self._down(index)
            return
        self._items.append([key, item_id, value])
        self._pos[item_id] = len(self._items) - 1
        self._up(len(self._items) - 1)

    def peek(self):
        """Return ``(key, id, value)`` of the smallest item, or None."""
        if not self._items:
            return None
        key, item_id, value = self._items[0]
        return key, item_id, value

    def pop(self):
        """Remove and return ``(key, id, value)`` of the smallest item."""
        if not self._items:
            raise IndexError("pop from an empty heap")
        return self._remove_at(0)

    def remove(self, item_id):
        """Remove an id; return its ``(key, id, value)`` or None if absent."""
        index = self._pos.get(item_id)
        if index is None:
            return None
        return self._remove_at(index)

    def clear(self):
        self._items.clear()
        self._pos.clear()

    def _remove_at(self, index):
        items = self._items
        last = items.pop()
        if index == len(items):
            del self._pos[last[1]]
            return tuple(last)
        removed = items[index]
        items[index] = last
        self._pos[last[1]] = index
        del self._pos[removed[1]]
        if index > 0 and (last[0], last[1]) < (items[(index - 1) >> 1][0], items[(index - 1) >> 1][1]):
            self._up(index)
        else:
            self._down(index)
        return tuple(removed)

    def _up(self, index):
        items, pos = self._items, self._pos
        item = items[index]
        key = (item[0], item[1])
        while index > 0:
            parent_index = (index - 1) >> 1
            parent = items[parent_index]
            if key < (parent[0], parent[1]):
                items[index] = parent
                pos[parent[1]] = index
                index = parent_index
            else:
                break
        items[index] = item
        pos[item[1]] = index

    def _down(self, index):
        items, pos = self._items, self._pos
        n = len(items)
        item = items[index]
        key = (item[0], item[1])
        while True:
            child = 2 * index + 1
            if child >= n:
                break
            right = child + 1
            if right < n and (items[right][0], items[right][1]) < (items[child][0], items[child][1]):
                child = right
            if (items[child][0], items[child][1]) < key:
                items[index] = items[child]
                pos[items[index][1]] = index
                index = child
            else:
                break
        items[index] = item
        pos[item[1]] = index
