"""The indexed heap against a sorted-list model (hypothesis), plus the basics."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from scheduler_app.dispatcher.heap import IndexedHeap


def test_push_pop_orders_by_key_then_id():
    heap = IndexedHeap()
    for item_id, key in [(3, 5.0), (1, 5.0), (2, 1.0), (4, 9.0)]:
        heap.push(item_id, key, f"v{item_id}")
    assert [heap.pop()[1] for _ in range(4)] == [2, 1, 3, 4]
    with pytest.raises(IndexError):
        heap.pop()


def test_remove_and_rekey_by_id():
    heap = IndexedHeap()
    for i in range(10):
        heap.push(i, float(i))
    assert heap.remove(0)[1] == 0 and heap.remove(0) is None
    heap.push(9, -1.0)  # reschedule earlier
    heap.push(1, 100.0)  # reschedule later
    assert heap.peek()[1] == 9
    order = [heap.pop()[1] for _ in range(len(heap))]
    assert order == [9, 2, 3, 4, 5, 6, 7, 8, 1]
    assert 9 not in heap and len(heap) == 0


def test_dead_entries_are_dropped_and_never_compared_by_value():
    # Values that cannot be ordered: a comparison reaching them would raise.
    heap = IndexedHeap()
    for round_ in range(200):
        for i in range(50):
            heap.push(i, float((i * 7 + round_) % 13), object())  # re-key: the old entry dies
        heap.push(0, heap.peek()[0], object())  # same key again: replaced in place
    for i in range(0, 50, 2):
        heap.remove(i)
    assert len(heap) == 25
    assert len(heap._heap) <= 2 * len(heap) + 64 + 1  # rebuilt as dead entries pile up
    keys = [heap.pop()[:2] for _ in range(25)]
    assert keys == sorted(keys) and {i for _, i in keys} == set(range(1, 50, 2))


class HeapModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.heap = IndexedHeap()
        self.model = {}  # id -> key

    ids = st.integers(min_value=0, max_value=30)
    keys = st.tuples(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), st.integers(-100, 100))

    @rule(item_id=ids, key=keys)
    def push(self, item_id, key):
        self.heap.push(item_id, key, ("value", item_id))
        self.model[item_id] = key

    @rule(item_id=ids)
    def remove(self, item_id):
        removed = self.heap.remove(item_id)
        expected = self.model.pop(item_id, None)
        assert (removed is None) == (expected is None)
        if removed is not None:
            assert removed[0] == expected

    @rule()
    def pop(self):
        if not self.model:
            return
        key, item_id, value = self.heap.pop()
        expected = min(self.model.items(), key=lambda kv: (kv[1], kv[0]))
        assert (item_id, key) == expected
        assert value == ("value", item_id)
        del self.model[item_id]

    @rule(n=st.integers(0, 5))
    def pop_values(self, n):
        values = self.heap.pop_values(n)
        expected = sorted(self.model.items(), key=lambda kv: (kv[1], kv[0]))[:n]
        assert values == [("value", item_id) for item_id, _ in expected]
        for item_id, _ in expected:
            del self.model[item_id]

    @invariant()
    def agrees_with_model(self):
        assert len(self.heap) == len(self.model)
        top = self.heap.peek()
        if self.model:
            expected = min(self.model.items(), key=lambda kv: (kv[1], kv[0]))
            assert (top[1], top[0]) == expected
        else:
            assert top is None
        for item_id in self.model:
            assert item_id in self.heap


TestHeapModel = HeapModel.TestCase
TestHeapModel.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)


def test_extend_is_a_push_of_each():
    pushed, extended = IndexedHeap(), IndexedHeap()
    items = [(i % 7, (i * 37 % 11, i % 3), f"v{i}") for i in range(40)]  # ids repeat: the last one wins
    for item in items:
        pushed.push(*item)
    extended.push(3, (-1, 0), "old")
    extended.extend(items)
    assert len(extended) == len(pushed) == 7
    assert [extended.pop() for _ in range(7)] == [pushed.pop() for _ in range(7)]
