"""The gate: which limited queues the loop may ask the database for now, and until when the others wait."""

import pytest

from scheduler_app.dispatcher.gate import Gate


def gate(*limited, retry_interval=2.0):
    g = Gate(retry_interval=retry_interval)
    g.update(limited)
    return g


# -- block ---------------------------------------------------------------------------------


def test_nothing_is_blocked_at_first():
    g = gate("a")
    assert g.blocked(0.0) == set() and g.next_moment({"a"}) is None


def test_a_full_concurrency_waits_for_a_job_to_end_or_the_retry_interval():
    g = gate("a", retry_interval=2.0)
    g.block("a", None, now=100.0)
    assert g.blocked(100.0) == {"a"} and g.blocked(101.999) == {"a"}
    assert g.next_moment({"a"}) == 102.0
    # A job whose dispatcher died ends with a rescue, and says nothing: ask again then.
    assert g.blocked(102.0) == set()


def test_a_full_rate_waits_until_the_window_has_room():
    g = gate("a")
    g.block("a", 107.5, now=100.0)
    assert g.next_moment({"a"}) == 107.5
    assert g.blocked(107.4) == {"a"} and g.blocked(107.5) == set()


def test_a_rate_window_that_has_room_already_does_not_block():
    g = gate("a")
    g.block("a", 90.0, now=100.0)  # the claim's "when" is in the past: a clock step, a slow claim
    assert g.next_moment({"a"}) == 100.0
    assert g.blocked(100.0) == set()


def test_blocked_forgets_blocks_that_ran_out():
    g = gate("a", "b")
    g.block("a", 105.0, now=100.0)
    g.block("b", 110.0, now=100.0)
    assert g.blocked(106.0) == {"b"}
    # Forgotten, not only filtered out: it no longer sets a moment to wake for.
    assert g.next_moment({"a", "b"}) == 110.0 and g.next_moment({"a"}) is None


def test_a_new_block_replaces_the_old_one():
    g = gate("a", retry_interval=1.0)
    g.block("a", 120.0, now=100.0)
    g.block("a", None, now=100.0)
    assert g.next_moment({"a"}) == 101.0
    g.free(["a"], only_concurrency=True)  # it now waits for a job to end: freed
    assert g.blocked(100.0) == set()


def test_blocked_returns_a_copy():
    g = gate("a")
    g.block("a", None, now=0.0)
    g.blocked(0.0).clear()
    assert g.blocked(0.0) == {"a"}


# -- free ------------------------------------------------------------------------------------


def test_free_unblocks_both_kinds():
    g = gate("a", "b", "c")
    g.block("a", None, now=0.0)
    g.block("b", 50.0, now=0.0)
    g.block("c", None, now=0.0)
    g.free(["a", "b"])  # a change of the queues' limits: room may have come back either way
    assert g.blocked(0.0) == {"c"}


def test_free_only_concurrency_leaves_rate_blocks_be():
    g = gate("a", "b")
    g.block("a", None, now=0.0)
    g.block("b", 50.0, now=0.0)
    # A job ended: a slot of the concurrency came back, the rate window did not move.
    g.free(["a", "b"], only_concurrency=True)
    assert g.blocked(0.0) == {"b"} and g.next_moment({"a", "b"}) == 50.0


def test_free_of_a_queue_not_blocked_is_nothing():
    g = gate("a")
    g.free(["a", "unknown"])
    g.free(["a"], only_concurrency=True)
    assert g.blocked(0.0) == set()


# -- next_moment ---------------------------------------------------------------------------


def test_next_moment_is_the_earliest_unblocking_of_the_queues_asked_about():
    g = gate("a", "b", "c", retry_interval=5.0)
    g.block("a", 30.0, now=0.0)
    g.block("b", 20.0, now=0.0)
    g.block("c", None, now=0.0)
    assert g.next_moment({"a", "b", "c"}) == 5.0
    assert g.next_moment({"a", "b"}) == 20.0
    assert g.next_moment({"a"}) == 30.0
    # Queues without due jobs are not asked about; a queue not blocked has no moment.
    assert g.next_moment(set()) is None and g.next_moment({"d"}) is None
    assert g.next_moment(["a", "a", "d"]) == 30.0


# -- update --------------------------------------------------------------------------------


def test_update_takes_the_limited_queues_as_a_frozenset():
    g = Gate()
    assert g.limited == frozenset()
    source = {"a", "b"}
    g.update(source)
    source.add("c")
    assert g.limited == {"a", "b"} and isinstance(g.limited, frozenset)
    g.update(iter(["x"]))
    assert g.limited == {"x"}


def test_update_unblocks_queues_that_lost_their_limits_only():
    g = gate("a", "b", "c")
    g.block("a", None, now=0.0)
    g.block("b", 50.0, now=0.0)
    g.block("c", 50.0, now=0.0)
    g.update({"a", "c", "d"})
    assert g.blocked(0.0) == {"a", "c"}
    g.update(set())
    assert g.blocked(0.0) == set() and g.next_moment({"a", "b", "c"}) is None


# -- to_tell -------------------------------------------------------------------------------


def test_to_tell_says_each_queue_at_most_once_per_tell_every():
    g = Gate()
    every = Gate.TELL_EVERY
    assert g.to_tell({"a", "b"}, 100.0) == {"a", "b"}
    assert g.to_tell({"a", "b"}, 100.0 + every / 2) == set()
    assert g.to_tell({"a", "c"}, 100.0 + every / 2) == {"c"}  # each queue on its own clock
    assert g.to_tell({"a", "b", "c"}, 100.0 + every * 1.01) == {"a", "b"}
    assert g.to_tell({"a", "c"}, 100.0 + every * 1.51) == {"c"}  # a: told at 1.01


def test_to_tell_again_exactly_tell_every_later():
    g = Gate()
    g.to_tell({"a"}, 0.0)
    assert g.to_tell({"a"}, Gate.TELL_EVERY) == {"a"}


def test_to_tell_notes_only_what_it_returns():
    g = Gate()
    g.to_tell({"a"}, 100.0)
    g.to_tell({"a"}, 100.0 + Gate.TELL_EVERY / 2)  # not told: must not push the next telling back
    assert g.to_tell({"a"}, 100.0 + Gate.TELL_EVERY * 1.01) == {"a"}


@pytest.mark.parametrize("now", [0.0, -5.0, 1.8e9])
def test_a_queue_never_told_is_told_at_any_time(now):
    assert Gate().to_tell({"q"}, now) == {"q"}
