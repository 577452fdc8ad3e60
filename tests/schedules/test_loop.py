"""Schedules in the dispatcher loop, with a fake clock and an in-memory store."""

from scheduler_app.dispatcher.timeline import SCHEDULES, ScheduleKey
from scheduler_app.vocabulary.wakeup import WakeUp
from tests.dispatcher.test_loop import make, settle


def quiet(**kw):
    return make(poll_interval=100, full_sync_interval=100, housekeeping_interval=100, pause_interval=100, **kw)


def test_a_schedule_due_in_three_seconds_wakes_the_loop_and_materialises_on_time():
    dispatcher, store, clock = quiet()
    dispatcher.lease = 300
    store.add_schedule(7, 1003.0, 30)
    wait = dispatcher.tick(clock.time())
    assert 2.9 < wait <= 3.0
    clock.advance(wait)
    assert settle(dispatcher, clock, lambda: store.materialized == [(7, 1003.0)])
    # The job it made is claimed like any other (the store's notify is faked here).
    dispatcher.notify(WakeUp.of(jobs=[[1_000_000, 1003.0, 0, "default"]]))
    assert settle(dispatcher, clock, lambda: store.jobs[1_000_000].status == "succeeded")
    # The next run (inside the 60 s horizon) is back in the heap; the loop waits for it.
    assert ScheduleKey(7) in dispatcher.timeline
    assert dispatcher.timeline.next_at() == 1033.0


def test_schedule_group_is_never_claimed_from():
    dispatcher, store, clock = quiet()
    store.add_schedule(1, 999.0, 10)
    dispatcher.tick(clock.time())
    assert all(SCHEDULES not in queues for queues, _, _ in store.claims)
    assert store.materialized == [(1, 999.0)]


def test_notifications_move_and_remove_schedule_entries():
    dispatcher, store, clock = quiet()
    dispatcher.tick(clock.time())
    dispatcher.notify(WakeUp.of(schedules=[[3, 1010.0]]))
    assert 9.9 < dispatcher.tick(clock.time()) <= 10.0
    dispatcher.notify(WakeUp.of(schedules=[[3, None]]))
    dispatcher.tick(clock.time())
    assert ScheduleKey(3) not in dispatcher.timeline


def test_burst_mode_materialises_due_schedules():
    dispatcher, store, clock = make(burst=True)
    store.add_schedule(1, 999.0, 3600)
    assert settle(dispatcher, clock, lambda: dispatcher.finished)
    assert store.materialized == [(1, 999.0)]
