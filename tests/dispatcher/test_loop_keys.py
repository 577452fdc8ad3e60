"""The loop and concurrency keys: keyed jobs wait apart, a full key holds only its own jobs, no spinning."""

from scheduler_app.dispatcher.timeline import Entry, Timeline
from tests.dispatcher.test_loop import make, settle


def running(store):
    return sorted(j.id for j in store.jobs.values() if j.status == "running")


def test_the_timeline_keeps_keyed_entries_apart_and_says_when_they_are_due():
    timeline = Timeline(lambda q: "*", cap=10)
    timeline.reload([Entry(1, 10.0, 0, "default"), Entry(2, 12.0, 0, "default", True)], edge=100.0, truncated=False)
    assert timeline.promote(11.0) == {"*"} and timeline.take_due("*", 5)[0].id == 1
    assert timeline.keyed_due(11.0) == set() and timeline.keyed_next_at(11.0) == 12.0
    assert timeline.keyed_due(12.0) == {"*"} and 2 in timeline and len(timeline) == 1
    assert timeline.drop_keyed_due("*", 12.0) == 1 and 2 not in timeline
    timeline.upsert(Entry(3, 5.0, 0, "default", True))
    assert timeline.remove(3) and len(timeline) == 0


def test_a_full_key_holds_its_jobs_only_and_is_not_asked_again_until_a_job_ends():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 4)}, poll_interval=1.0, full_sync_interval=100, pause_interval=100
    )
    for i in range(5):
        store.add(i, 999.0, sleep=30, priority=50, key="hot", key_limit=1)
    store.add(10, 999.0, sleep=30, key="other")
    store.add(20, 999.0, sleep=30)
    assert settle(dispatcher, clock, lambda: running(store) == [0, 10, 20])
    asked = len(store.keyed_claims)
    waits = [dispatcher.tick(clock.time() + k * 0.01) for k in range(50)]
    # Fifty wake-ups and not one more keyed claim: the held key waits for a change.
    assert len(store.keyed_claims) == asked
    assert min(waits) > 0
    assert running(store) == [0, 10, 20]
    # The retry interval passes: one more try, still full.
    clock.advance(1.01)
    dispatcher.tick(clock.time())
    assert len(store.keyed_claims) == asked + 1 and store.keyed_claims[-1][3]
    dispatcher.stop()


def test_a_job_of_the_key_ending_here_lets_the_next_one_start():
    dispatcher, store, clock = make(
        {"*": ({"default"}, 2)}, poll_interval=100, full_sync_interval=100, pause_interval=100
    )
    store.add(1, 999.0, key="k")
    store.add(2, 999.0, key="k")
    assert settle(dispatcher, clock, lambda: store.jobs[2].status == "succeeded")
    assert store.jobs[1].status == "succeeded"
    assert all(len(ids) <= 1 for _, _, ids, _ in store.keyed_claims)
    dispatcher.stop()
