"""``rundispatcher --burst`` skips a due job another transaction holds locked, runs the rest and exits.

PostgreSQL only: SQLite has no row locks (a writer holds the whole file).
The lock is a real ``SELECT ... FOR UPDATE`` of a second connection, held
while the burst runs in this process.
"""

import threading

import pytest
from django.core.management import call_command
from django.db import connections, transaction

from scheduler_app import lifecycle
from scheduler_app.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

ADD = "tests.testapp.tasks.add"
DEADLINE = 60.0  # a hang guard: the burst ends in well under a second once it skips the lock


def hold_lock(job_id, locked, release):
    """Lock ``job_id``'s row in a transaction of this thread's own connection until ``release`` is set."""
    try:
        with transaction.atomic():
            Job.objects.select_for_update().get(pk=job_id)
            locked.set()
            release.wait(DEADLINE * 2)
    finally:
        connections.close_all()


def test_a_burst_skips_a_locked_due_job_runs_the_others_and_exits():
    held, *others = [lifecycle.enqueue(ADD, [i, i])[0] for i in range(4)]
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_lock, args=(held.pk, locked, release), daemon=True)
    holder.start()
    assert locked.wait(DEADLINE)
    burst = threading.Thread(target=call_command, args=("rundispatcher", "--burst", "--concurrency", "2"), daemon=True)
    try:
        burst.start()
        burst.join(DEADLINE)
        ended_while_locked = not burst.is_alive()
    finally:
        release.set()
        burst.join(DEADLINE)
        holder.join(DEADLINE)
        connections.close_all()
    assert ended_while_locked, "the burst kept re-claiming while a due job was locked"
    rows = dict(Job.objects.values_list("pk", "status"))
    assert rows == {held.pk: "pending", **{job.pk: "succeeded" for job in others}}
