"""The rescue service: it looks again when the earliest running lease runs out, whatever the rows hold.

A lease stored as text that is no time reads as none (``sql.readable``): the service stays on its interval.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scheduler_app import lifecycle
from scheduler_app.maintenance.rescue import SLACK, Rescue
from scheduler_app.models import Job
from scheduler_app.vocabulary.policy import RetryPolicy
from tests.plumbing import ADD

pytestmark = pytest.mark.django_db

LEASE = 30.0


def test_it_looks_again_at_the_earliest_lease_or_within_a_third_of_one():
    service = Rescue(lease=LEASE, policy=RetryPolicy())
    now = timezone.now()
    epoch = now.timestamp()
    assert service.run(now, epoch) == epoch + LEASE / 3  # nothing running
    job = lifecycle.enqueue(ADD, [1, 2])[0]
    Job.objects.filter(pk=job.pk).update(
        status="running", worker="w", attempts=1, lease_expires_at=now + timedelta(seconds=4)
    )
    assert service.run(now, epoch) == pytest.approx(epoch + 4 + SLACK)


def test_a_lease_stored_as_no_time_leaves_it_on_its_interval():
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite stores text that is no time")
    job = lifecycle.enqueue(ADD, [1, 2])[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE scheduler_app_job SET status = 'running', worker = 'w', attempts = 1, "
            "lease_expires_at = 'garbage' WHERE id = %s",
            [job.pk],
        )
    now = timezone.now()
    assert Rescue(lease=LEASE, policy=RetryPolicy()).run(now, now.timestamp()) == now.timestamp() + LEASE / 3
