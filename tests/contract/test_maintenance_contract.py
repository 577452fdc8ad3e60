"""One leader runs the maintenance: the contract of ``Store.maintain`` on the fake and on DjangoStore.

Times are the cases' ``now`` (as in test_store_contract.py): a lease runs
out because a later ``now`` is given. Who leads across real processes, and
a leader's ``kill -9``: tests/runtime/test_leader_processes.py.
"""

from scheduler_app.vocabulary.jobs import Status
from tests.contract.conftest import LEASE

QUEUES = frozenset({"default", "slow"})
EVERY = 60.0


def maintain(store, now):
    return store.maintain(now, housekeeping_interval=EVERY)


def test_the_first_to_maintain_leads_and_the_others_follow(harness, store, now):
    peer = harness.peer("contract-b")
    for s in (store, peer):
        s.register(queues=QUEUES, slots={"*": 1})
    assert not store.leads
    again = maintain(store, now)
    assert store.leads and now < again <= now + LEASE / 3
    follow = maintain(peer, now + 1)
    assert not peer.leads and now + 1 < follow <= now + 1 + LEASE / 3
    maintain(store, now + 2)  # the leader renews
    assert store.leads and not peer.leads


def test_only_the_leader_rescues_and_a_lease_that_ran_out_is_rescued_by_it(harness, store, now):
    peer = harness.peer("contract-b")
    for s in (store, peer):
        s.register(queues=QUEUES, slots={"*": 1})
    job_id = harness.add(now - 1, max_attempts=3)
    maintain(store, now)
    (job,) = peer.claim(QUEUES, 1, now)
    maintain(store, now + 10)  # renewed: the lead holds until now + 10 + LEASE
    # The job's lease ran out at now + LEASE: the follower leaves it alone.
    maintain(peer, now + LEASE + 1)
    assert not peer.leads and harness.row(job_id)["status"] == Status.RUNNING
    # The leader's next run rescues it: it is due again, its lost attempt counted.
    maintain(store, now + LEASE + 1)
    row = harness.row(job_id)
    assert (row["status"], row["attempts"]) == (Status.PENDING, 1)


def test_a_leader_that_stops_hands_the_lead_on_at_once(harness, store, now):
    peer = harness.peer("contract-b")
    for s in (store, peer):
        s.register(queues=QUEUES, slots={"*": 1})
    maintain(store, now)
    maintain(peer, now + 1)
    assert store.leads and not peer.leads
    store.unregister(processed=0, failed=0)
    assert not store.leads
    maintain(peer, now + 2)
    assert peer.leads


def test_a_leader_silent_for_a_lease_loses_the_lead_and_learns_it(harness, store, now):
    peer = harness.peer("contract-b")
    for s in (store, peer):
        s.register(queues=QUEUES, slots={"*": 1})
    maintain(store, now)
    maintain(peer, now + LEASE - 1)
    assert not peer.leads
    maintain(peer, now + LEASE + 1)  # the leader paused past its lease
    assert peer.leads
    maintain(store, now + LEASE + 2)  # it wakes: the lead is the other's now
    assert not store.leads and peer.leads
