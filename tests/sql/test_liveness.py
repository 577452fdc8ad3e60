"""A dispatcher's liveness lock (``sql.liveness``): held until closed or its holder ends, on both databases."""

import pytest
from django.db import transaction

from scheduler_app.sql import liveness

pytestmark = pytest.mark.django_db(transaction=True)


def gone(*worker_ids):
    with transaction.atomic():
        return liveness.gone(worker_ids)


def as_if_in_another_process(holder):
    """Forget that this process holds ``holder``: only the database's (or the kernel's) lock speaks for it."""
    liveness._held.discard(holder.worker_id)


def test_a_held_lock_says_alive_until_it_is_closed_and_an_unknown_dispatcher_is_gone():
    holder = liveness.Liveness("live-1")
    try:
        assert gone("live-1", "never-seen") == {"never-seen"}
        as_if_in_another_process(holder)
        assert gone("live-1") == set()  # the lock itself says so
    finally:
        holder.close()
    assert gone("live-1") == {"live-1"}


def test_the_lock_ends_with_its_holders_session_or_file_and_is_taken_again_by_ensure():
    holder = liveness.Liveness("live-2")
    try:
        as_if_in_another_process(holder)
        resource = holder._resource
        if isinstance(resource, int):  # SQLite: the kernel lets an flock go with its file description
            import os

            os.close(resource)
            holder._resource = None
            assert gone("live-2") == {"live-2"}
        else:  # PostgreSQL: the lock ends with the session that held it
            resource.close()
            assert gone("live-2") == {"live-2"}
            holder.ensure()  # a hand-back checks first: the lock is taken again
            assert gone("live-2") == set()
    finally:
        holder.close()
