import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduler_app import lifecycle

ADD = "tests.testapp.tasks.add"


def grant(user, *names):
    """Give ``user`` the permissions ``names`` ("scheduler_app.view_job", ...); none: all of the app's."""
    perms = Permission.objects.filter(content_type__app_label="scheduler_app")
    if names:
        perms = perms.filter(codename__in=[name.split(".", 1)[1] for name in names])
        assert perms.count() == len(names), names
    user.user_permissions.add(*perms)


@pytest.fixture
def api(staff_user):
    """Return an APIClient authenticated with a token as staff holding every scheduler permission."""
    grant(staff_user)
    token = Token.objects.create(user=staff_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def anon():
    return APIClient()


@pytest.fixture
def non_staff(plain_user):
    token = Token.objects.create(user=plain_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def make_job(db):
    """Return a function that enqueues a job through the lifecycle service."""

    def make(task=ADD, args=None, **options):
        if args is None:
            args = (1, 2) if task == ADD else ()
        job, _ = lifecycle.enqueue(task, list(args), options.pop("kwargs", None), **options)
        return job

    return make


@pytest.fixture
def set_status():
    """Return a function that puts a job in a state (test setup only)."""
    from django.utils import timezone

    from scheduler_app.models import Job

    def set_status(job, status, **fields):
        now = timezone.now()
        if status == "running":
            fields = {"attempts": 1, "worker": "w-test", "started_at": now, **fields}
        elif status in ("succeeded", "failed", "cancelled"):
            fields = {"finished_at": now, **fields}
        Job.objects.filter(pk=job.pk).update(status=status, updated_at=now, **fields)
        job.refresh_from_db()
        return job

    return set_status
