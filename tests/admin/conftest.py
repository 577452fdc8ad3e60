from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from scheduler_app.models import Job, JobStatus

ADD = "tests.testapp.tasks.add"


@pytest.fixture
def make_job(db):
    """Create a job row in any state (test setup, not a transition under test)."""

    def make(status=JobStatus.PENDING, **fields):
        now = timezone.now()
        defaults = {"task": ADD, "args": [1, 2], "execute_at": now}
        if status == JobStatus.RUNNING:
            defaults.update(attempts=1, started_at=now - timedelta(seconds=42), worker="host:1:abc", lease_expires_at=now + timedelta(seconds=30))
        elif status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            defaults.update(attempts=1, started_at=now - timedelta(seconds=3), finished_at=now, worker="host:1:abc")
        elif status == JobStatus.CANCELLED:
            defaults.update(finished_at=now)
        defaults.update(fields)
        return Job.objects.create(status=status, **defaults)

    return make


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client


def grant(user, *codenames):
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="scheduler_app", codename__in=codenames))
    return user
