"""The window: the timeline kept in step with the store by reloads, change polls and wake-up messages."""

import pytest

from scheduler_app.dispatcher.timeline import SCHEDULES, Entry, ScheduleKey, Timeline, schedule_entry
from scheduler_app.dispatcher.window import Window
from scheduler_app.vocabulary.wakeup import WakeUp
from tests.dispatcher.fakes import FakeClock, FakeStore

NOW = 1000.0


class RecordingStore(FakeStore):
    """FakeStore that records each window load and each change poll."""

    def __init__(self, clock):
        super().__init__(clock)
        self.loads = []  # (queues, until, limit)
        self.polls = []  # since

    def load_window(self, queues, until, limit):
        self.loads.append((set(queues), until, limit))
        return super().load_window(queues, until, limit)

    def changes(self, queues, since, limit=None):
        self.polls.append(since)
        return super().changes(queues, since, limit)


def make(*, cap=100, horizon=60.0, poll_interval=1.0, full_sync_interval=30.0, sync_overlap=2.0):
    clock = FakeClock(NOW)
    store = RecordingStore(clock)
    queues = {"default": "*", "slow": "*"}

    def group_of(queue):
        return SCHEDULES if queue == SCHEDULES else queues.get(queue)

    window = Window(
        Timeline(group_of, cap),
        frozenset(queues),
        horizon=horizon,
        poll_interval=poll_interval,
        full_sync_interval=full_sync_interval,
        sync_overlap=sync_overlap,
    )
    return window, store


def ids(window):
    return {job_id for job_id in range(-1000, 10_000) if job_id in window.timeline}


# -- reload ----------------------------------------------------------------------------------


def test_a_reload_reads_the_pending_jobs_of_its_queues_up_to_the_horizon():
    window, store = make(horizon=60.0)
    store.add(1, NOW - 500)  # overdue: due at once
    store.add(2, NOW + 59.0)
    store.add(3, NOW + 61.0)  # beyond the horizon
    store.add(4, NOW, queue="other")  # not served here
    store.add(5, NOW, queue="slow")
    store.add(6, NOW, status="running")
    window.reload(store, NOW)
    assert store.loads == [({"default", "slow"}, NOW + 60.0, 100)]
    assert ids(window) == {1, 2, 5}
    tl = window.timeline
    assert (tl.edge, tl.truncated) == (NOW + 60.0, False)
    assert (window.watermark, window.due_poll, window.due_full, window.need_poll) == (NOW, NOW + 1.0, NOW + 30.0, False)


def test_a_reload_replaces_what_the_window_held():
    window, store = make()
    window.apply(Entry(77, NOW + 5, 0, "default"))  # gone from the database since
    store.add(1, NOW + 5)
    window.reload(store, NOW)
    assert ids(window) == {1}


def test_a_load_that_fills_the_cap_is_truncated_at_its_last_entry():
    window, store = make(cap=4)
    for i in range(10):
        store.add(i, NOW + 1 + i)
    window.reload(store, NOW)
    tl = window.timeline
    assert ids(window) == {0, 1, 2, 3}
    assert (tl.truncated, tl.edge) == (True, NOW + 4)


@pytest.mark.parametrize(
    "horizon, full_sync_interval, expected",
    [
        (1000.0, 30.0, 30.0),  # as asked
        (10.0, 30.0, 5.0),  # at least twice per horizon: the window slides by reloading
        (0.1, 30.0, 0.1),  # never below a tenth of a second
        (0.0, 30.0, 0.1),
    ],
)
def test_the_full_sync_interval_is_at_most_half_the_horizon(horizon, full_sync_interval, expected):
    window, _ = make(horizon=horizon, full_sync_interval=full_sync_interval)
    assert window.full_sync_interval == expected


# -- sync: which one, when ---------------------------------------------------------------


def test_the_first_sync_reloads():
    window, store = make()
    window.sync(store, NOW)
    assert len(store.loads) == 1 and store.polls == []


def test_sync_polls_every_poll_interval_and_reloads_every_full_sync_interval():
    window, store = make(poll_interval=1.0, full_sync_interval=10.0)
    window.sync(store, NOW)
    window.sync(store, NOW + 0.5)
    assert (len(store.loads), len(store.polls)) == (1, 0)
    window.sync(store, NOW + 1.0)
    assert (len(store.loads), len(store.polls)) == (1, 1)
    assert (window.watermark, window.due_poll, window.due_full) == (NOW + 1.0, NOW + 2.0, NOW + 10.0)
    window.sync(store, NOW + 10.0)  # a reload is due (and a poll): the reload does both
    assert (len(store.loads), len(store.polls)) == (2, 1)
    assert (window.due_poll, window.due_full) == (NOW + 11.0, NOW + 20.0)


def test_a_sync_message_brings_the_poll_forward():
    window, store = make(poll_interval=5.0)
    window.sync(store, NOW)
    window.apply_message(WakeUp(sync=True))
    assert window.need_poll
    window.sync(store, NOW + 0.1)
    assert (len(store.loads), len(store.polls), window.need_poll) == (1, 1, False)
    assert window.due_poll == NOW + 5.1


def test_a_message_without_sync_does_not_ask_for_a_poll():
    window, store = make(poll_interval=5.0)
    window.sync(store, NOW)
    window.apply_message(WakeUp.of(jobs=[(1, NOW + 1, 0, "default")], removed=[2]))
    window.sync(store, NOW + 0.1)
    assert (window.need_poll, store.polls) == (False, [])


def test_a_reload_satisfies_a_pending_poll_request():
    window, store = make()
    window.sync(store, NOW)
    window.need_poll = True
    window.reload(store, NOW + 0.1)
    assert not window.need_poll


# -- poll: the watermark and the overlap ------------------------------------------------------


def test_a_poll_reaches_back_the_overlap_for_late_commits():
    window, store = make(sync_overlap=2.0)
    window.reload(store, NOW)
    store.add(1, NOW + 5).updated = NOW - 1.5  # stamped before the load, committed after it
    store.add(2, NOW + 5).updated = NOW - 2.5  # older than the overlap: the load saw it (or it is gone)
    window.poll(store, NOW + 1)
    assert store.polls == [NOW - 2.0]
    assert ids(window) == {1}


def test_the_watermark_moves_to_each_poll_even_without_changes():
    window, store = make(sync_overlap=2.0)
    window.reload(store, NOW)
    window.poll(store, NOW + 1)
    window.poll(store, NOW + 2)
    assert store.polls == [NOW - 2.0, NOW - 1.0]
    assert window.watermark == NOW + 2


def test_a_change_stamped_in_the_future_does_not_move_the_watermark_past_now():
    window, store = make(sync_overlap=2.0)
    window.reload(store, NOW)
    store.add(1, NOW + 5).updated = NOW + 5000  # a clock ahead, a row written around the service
    window.poll(store, NOW + 1)
    assert 1 in window.timeline and window.watermark == NOW + 1
    window.poll(store, NOW + 2)
    assert store.polls[-1] == NOW - 1.0


def test_a_poll_before_any_load_reaches_back_from_now():
    window, store = make(sync_overlap=2.0)
    window.poll(store, NOW)
    assert store.polls == [NOW - 2.0] and window.watermark == NOW


def test_a_poll_asks_for_at_most_the_cap():
    window, store = make(cap=7)
    window.reload(store, NOW)
    window.poll(store, NOW + 1)
    assert store.change_limits == [7]


def test_more_changes_than_the_cap_reload_instead():
    window, store = make(cap=3)
    window.reload(store, NOW)
    for i in range(5):
        store.add(i, NOW + 10 + i)
    window.poll(store, NOW + 1)
    assert len(store.loads) == 2
    tl = window.timeline
    assert ids(window) == {0, 1, 2} and tl.truncated and tl.edge == NOW + 12
    assert (window.watermark, window.due_poll) == (NOW + 1, NOW + 2)


def test_a_poll_moves_and_adds_entries_and_drops_schedules_with_nothing_to_run():
    window, store = make()
    store.add(1, NOW + 30)
    store.add_schedule(5, NOW + 20, 60)
    window.reload(store, NOW)
    assert ScheduleKey(5) in window.timeline
    store.jobs[1].at, store.jobs[1].updated = NOW + 2, NOW + 0.5  # moved earlier
    store.add(2, NOW + 3)
    store.schedules[5].at, store.schedules[5].updated = None, NOW + 0.5  # disabled
    window.poll(store, NOW + 1)
    assert window.timeline.next_at() == NOW + 2
    assert 2 in window.timeline and ScheduleKey(5) not in window.timeline


# -- reloading a truncated window ---------------------------------------------------------


def truncated(*, cap=10, poll_interval=1.0, first=NOW + 1, step=1.0, count=20):
    window, store = make(cap=cap, poll_interval=poll_interval)
    for i in range(count):
        # Written long ago: change polls do not read them again.
        store.add(i, first + i * step).updated = NOW - 100
    window.sync(store, NOW)
    assert window.timeline.truncated
    return window, store


def test_a_truncated_window_drained_to_half_its_cap_reloads_at_once():
    window, store = truncated(cap=10)
    for i in range(5):
        window.timeline.remove(i)  # claimed
    window.sync(store, NOW + 0.1)  # five left: half the cap, not less
    assert len(store.loads) == 1
    window.timeline.remove(5)
    window.sync(store, NOW + 0.1)  # before the poll is due
    assert len(store.loads) == 2 and store.polls == []


def test_a_window_that_is_not_truncated_never_reloads_for_being_empty():
    window, store = make(cap=10, poll_interval=5.0)
    store.add(1, NOW + 1)
    window.sync(store, NOW)
    window.timeline.remove(1)
    window.sync(store, NOW + 0.1)
    assert len(store.loads) == 1


def test_time_passing_the_edge_reloads_at_most_once_per_poll_interval():
    window, store = truncated(cap=4, poll_interval=5.0, first=NOW + 0.5, step=0.5)
    assert window.timeline.edge == NOW + 2.0
    window.sync(store, NOW + 2.5)  # past the edge, the poll not due: jobs beyond it may wait that long
    assert (len(store.loads), store.polls) == (1, [])
    window.sync(store, NOW + 5.0)
    assert (len(store.loads), store.polls) == (2, [])


def test_an_edge_ahead_reloads_when_time_passes_it_instead_of_polling():
    window, store = truncated(cap=4, poll_interval=1.0, first=NOW + 1, step=1.0)
    assert window.timeline.edge == NOW + 4
    window.sync(store, NOW + 3.5)  # the edge still ahead: a poll
    assert (len(store.loads), len(store.polls)) == (1, 1)
    window.sync(store, NOW + 4.5)
    assert (len(store.loads), len(store.polls)) == (2, 1)


def test_a_backlog_already_due_at_load_time_is_not_reloaded_at_every_poll():
    # The window is all due jobs: claims go by query; re-reading the same rows would only burn time.
    window, store = truncated(cap=4, poll_interval=1.0, first=NOW - 100, step=1.0)
    assert window.timeline.edge < NOW
    window.sync(store, NOW + 1)
    window.sync(store, NOW + 2)
    assert (len(store.loads), len(store.polls)) == (1, 2)


# -- messages -------------------------------------------------------------------------------


def test_a_message_adds_and_moves_jobs_of_its_queues():
    window, store = make()
    window.reload(store, NOW)
    window.apply_message(WakeUp.of(jobs=[(1, NOW + 9, 0, "default"), (2, NOW + 5, 3, "slow"), (3, NOW, 0, "other")]))
    assert ids(window) == {1, 2}
    window.apply_message(WakeUp.of(jobs=[(1, NOW + 1, 0, "default")]))
    assert window.timeline.next_at() == NOW + 1


def test_a_message_about_a_job_beyond_the_edge_is_not_kept():
    window, store = make(horizon=60.0)
    window.reload(store, NOW)
    window.apply_message(WakeUp.of(jobs=[(1, NOW + 61, 0, "default")]))
    assert 1 not in window.timeline


def test_a_message_removes_jobs():
    window, store = make()
    store.add(1, NOW + 5)
    store.add(2, NOW + 6)
    window.reload(store, NOW)
    window.apply_message(WakeUp.of(removed=[1, 99]))
    assert ids(window) == {2}


def test_a_message_adds_moves_and_drops_schedules():
    window, store = make()
    window.reload(store, NOW)
    window.apply_message(WakeUp.of(schedules=[(5, NOW + 20), (6, NOW + 30)]))
    assert ScheduleKey(5) in window.timeline and ScheduleKey(6) in window.timeline
    window.apply_message(WakeUp.of(schedules=[(5, NOW + 2), (6, None)]))
    assert ScheduleKey(6) not in window.timeline and window.timeline.next_at() == NOW + 2


def test_apply_drops_an_entry_without_a_time_and_upserts_the_others():
    window, store = make()
    window.reload(store, NOW)
    window.apply(schedule_entry(3, NOW + 4))
    window.apply(Entry(4, NOW + 4, 0, "default"))
    assert ScheduleKey(3) in window.timeline and 4 in window.timeline
    window.apply(schedule_entry(3, None))
    assert ScheduleKey(3) not in window.timeline and 4 in window.timeline


# -- moments ---------------------------------------------------------------------------------


def test_moments_are_the_poll_and_the_reload_and_while_claiming_the_next_entry():
    window, store = make(poll_interval=1.0, full_sync_interval=10.0)
    store.add(1, NOW + 7)
    window.sync(store, NOW)
    assert window.moments() == [NOW + 1, NOW + 10, NOW + 7]
    assert window.moments(claiming=False) == [NOW + 1, NOW + 10]


def test_an_empty_window_needs_only_its_poll_and_reload():
    window, store = make(poll_interval=1.0, full_sync_interval=10.0)
    window.sync(store, NOW)
    assert window.moments() == [NOW + 1, NOW + 10]


def test_a_truncated_window_also_needs_its_edge_but_not_before_the_poll():
    window, _ = truncated(cap=4, poll_interval=1.0, first=NOW + 3, step=1.0)  # edge at NOW + 6
    assert window.moments()[-1] == NOW + 6
    assert NOW + 6 not in window.moments(claiming=False)
    window, _ = truncated(cap=4, poll_interval=5.0, first=NOW + 0.5, step=0.5)  # edge at NOW + 2
    assert window.moments()[-1] == NOW + 5.0  # the edge's reload waits for the poll (see above)
