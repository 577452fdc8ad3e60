"""The window: promotion of due entries, the edge, the cap, removal and reschedule."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_app.dispatcher.timeline import Entry, Timeline

GROUPS = {"default": "*", "slow": "*", "fast": "fast"}


def make(cap=100, edge=1000.0):
    tl = Timeline(GROUPS.get, cap)
    tl.reload([], edge=edge, truncated=False)
    return tl


def test_promote_moves_due_entries_to_their_group():
    tl = make()
    tl.upsert(Entry(1, 10.0, 0, "default"))
    tl.upsert(Entry(2, 20.0, 0, "fast"))
    tl.upsert(Entry(3, 30.0, 0, "default"))
    assert tl.next_at() == 10.0
    assert tl.promote(5.0) == set()
    assert tl.promote(20.0) == {"*", "fast"}
    assert tl.due_ids("*") == [1] and tl.due_ids("fast") == [2]
    assert tl.next_at() == 30.0


def test_far_future_top_does_not_hide_an_earlier_job():
    tl = make()
    tl.upsert(Entry(1, 900.0, 0, "default"))
    tl.upsert(Entry(2, 5.0, 0, "default"))
    assert tl.next_at() == 5.0


def test_unserved_queue_and_beyond_edge_are_ignored():
    tl = make(edge=100.0)
    assert not tl.upsert(Entry(1, 10.0, 0, "unknown"))
    assert not tl.upsert(Entry(2, 101.0, 0, "default"))
    assert len(tl) == 0


def test_reschedule_moves_a_due_entry_back_to_waiting():
    tl = make()
    tl.upsert(Entry(1, 10.0, 0, "default"))
    tl.promote(10.0)
    tl.upsert(Entry(1, 50.0, 0, "default"))
    assert tl.due_count("*") == 0 and tl.next_at() == 50.0
    assert tl.remove(1) and not tl.remove(1)


def test_cap_shrinks_the_edge_instead_of_growing():
    tl = make(cap=3)
    for i, at in enumerate([10.0, 20.0, 30.0]):
        assert tl.upsert(Entry(i, at, 0, "default"))
    assert not tl.upsert(Entry(9, 15.0, 0, "default"))
    assert len(tl) == 3 and tl.truncated and tl.edge < 15.0
    # Updating an entry already held is always allowed.
    assert tl.upsert(Entry(0, 12.0, 0, "default"))


def test_drop_due_forgets_stale_entries():
    tl = make()
    for i in range(5):
        tl.upsert(Entry(i, 1.0, 0, "default"))
    tl.promote(2.0)
    assert tl.drop_due("*") == 5 and len(tl) == 0


def test_window_slides_with_reload():
    tl = make(edge=100.0)
    tl.reload([Entry(1, 150.0, 0, "default")], edge=200.0, truncated=False)
    assert tl.next_at() == 150.0 and tl.upsert(Entry(2, 180.0, 0, "default"))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["upsert", "remove", "promote"]), st.integers(0, 20), st.floats(0, 100, allow_nan=False)
        ),
        max_size=80,
    )
)
def test_against_a_sorted_list_model(ops):
    tl = make(cap=1000, edge=1000.0)
    model = {}  # id -> at, for entries not yet promoted
    due = {}  # id -> at, for promoted ones
    for op, job_id, at in ops:
        if op == "upsert":
            tl.upsert(Entry(job_id, at, 0, "default"))
            if due.get(job_id) != at:  # an unchanged due entry stays due
                due.pop(job_id, None)
                model[job_id] = at
        elif op == "remove":
            tl.remove(job_id)
            model.pop(job_id, None)
            due.pop(job_id, None)
        else:
            tl.promote(at)
            for i, t in list(model.items()):
                if t <= at:
                    due[i] = t
                    del model[i]
        expected_next = min(model.values()) if model else None
        assert tl.next_at() == expected_next
        assert set(tl.due_ids("*")) == set(due)
        assert len(tl) == len(model) + len(due)


def test_an_unchanged_entry_is_left_where_it_is():
    tl = make()
    tl.upsert(Entry(1, 5.0, 0, "default"))
    tl.upsert(Entry(2, 50.0, 0, "default"))
    tl.promote(10.0)
    tl.upsert(Entry(1, 5.0, 0, "default"))  # a poll re-reads it
    tl.upsert(Entry(2, 50.0, 0, "default"))
    assert tl.due_ids("*") == [1] and tl.next_at() == 50.0
    tl.upsert(Entry(1, 5.0, 3, "default"))  # a changed priority is applied
    assert tl.due_ids("*") == [] and tl.next_at() == 5.0


def test_take_due_merges_queues_in_claim_order_and_skips_paused():
    tl = make()
    tl.upsert(Entry(1, 5.0, 0, "default"))
    tl.upsert(Entry(2, 6.0, 10, "slow"))
    tl.upsert(Entry(3, 4.0, 0, "slow"))
    tl.upsert(Entry(4, 1.0, -1, "default"))
    tl.upsert(Entry(5, 1.0, 99, "fast"))  # another group
    assert tl.promote(10.0) == {"*", "fast"}
    assert [e.id for e in tl.take_due("*", 2)] == [2, 3]
    assert [e.id for e in tl.take_due("*", 5, skip={"default"})] == []
    assert [e.id for e in tl.take_due("*", 5)] == [1, 4]
    assert tl.due_count("*") == 0 and tl.due_count("fast") == 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),
            st.sampled_from([1.0, 2.0, 3.0]),
            st.integers(-2, 2),
            st.sampled_from(["default", "slow", "fast"]),
        ),
        max_size=60,
    ),
    st.sets(st.integers(0, 30)),
    st.integers(1, 7),
    st.booleans(),
)
def test_take_due_hands_out_claim_order_from_one_queue_or_several(entries, removed, batch, one_queue):
    tl = make()
    live = {}
    for job_id, at, priority, queue in entries:
        queue = "default" if one_queue and queue != "fast" else queue
        tl.upsert(Entry(job_id, at, priority, queue))
        live[job_id] = (at, priority, queue)
    tl.promote(10.0)
    for job_id in removed:  # claimed or cancelled meanwhile: their heap entries die
        tl.remove(job_id)
        live.pop(job_id, None)
    expected = sorted(
        (job_id for job_id, (_, _, queue) in live.items() if queue != "fast"),
        key=lambda i: (-live[i][1], live[i][0], i),
    )
    taken = []
    while chunk := tl.take_due("*", batch):
        assert len(chunk) <= batch
        taken.extend(e.id for e in chunk)
    assert taken == expected
    assert tl.due_count("*") == 0 and len(tl) == len(live) - len(expected)


def drained(tl):
    """Return what ``tl`` holds, in the order it would hand it out: due now, then the rest by time."""
    due = {g: [e.id for e in tl.take_due(g, 1000)] for g in ("*", "fast")}
    keyed = sorted(tl._keyed_group.items())
    tl.promote(float("inf"))
    later = {g: [e.id for e in tl.take_due(g, 1000)] for g in ("*", "fast")}
    return due, keyed, later


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 25),
            st.sampled_from([1.0, 2.0, 5.0, 9.0, 2000.0]),
            st.integers(-2, 2),
            st.sampled_from(["default", "slow", "fast", "unserved"]),
            st.booleans(),
        ),
        max_size=60,
    ),
    st.sampled_from([0.0, 2.0, 5.0, 100.0]),
)
def test_a_reload_with_now_is_a_reload_then_promote(rows, now):
    entries = [Entry(i, at, p, q, keyed) for i, at, p, q, keyed in rows]
    one, two = make(cap=40), make(cap=40)
    one.reload(entries, edge=1000.0, truncated=True, now=now)
    two.reload(entries, edge=1000.0, truncated=True)
    assert one.promote(now) == two.promote(now)
    assert (len(one), one.next_at(), one.truncated, one.edge) == (len(two), two.next_at(), two.truncated, two.edge)
    assert drained(one) == drained(two)
