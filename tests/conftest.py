import pytest
from django.contrib.auth import get_user_model

from tests.plumbing import ADD, grant, token_client


@pytest.fixture(autouse=True, scope="session")
def _flush_with_delete_on_postgresql():
    """Empty tables with DELETE, not TRUNCATE, after each transactional test on PostgreSQL.

    Django's flush TRUNCATEs every table (14 here): new files for each,
    synced at commit, 0.3-0.6 s after every ``transaction=True`` test, which
    most dispatcher tests are. A DELETE of the few rows a test leaves takes
    milliseconds. Same end state: empty tables, sequences not reset (flush
    does not reset them either). Foreign keys are DEFERRABLE INITIALLY
    DEFERRED and flush runs its statements in one transaction, so the order
    of the tables does not matter.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    ops = type(connection.ops)
    truncate = ops.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};" for t in tables]

    ops.sql_flush = sql_flush
    try:
        yield
    finally:
        ops.sql_flush = truncate


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report):
    """Send xdist's controller text it can encode: a test's captured output may hold lone surrogates.

    Tests of unstorable values log them (a task's '\\udcff'); execnet refuses
    such a string and the worker dies with the whole run.
    """
    return _encodable((yield))


def _encodable(value):
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_encodable(v) for v in value)
    return value


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user("staff", "staff@example.com", "pw-staff-123", is_staff=True)


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("admin", "admin@example.com", "pw-admin-123")


@pytest.fixture
def plain_user(db):
    return get_user_model().objects.create_user("plain", "plain@example.com", "pw-plain-123")


# The tests of what imports no database (the pure packages and the house rules).
PURE_TESTS = ("/tests/vocabulary/", "/tests/dispatcher/", "/tests/house/")


def _pure(path):
    return any(part in str(path) for part in PURE_TESTS)


def pytest_collection_modifyitems(config, items):
    from django.db import connection

    # The slow tests first (a stable sort keeps each file's order): spread over
    # xdist's workers, they start at once and the end of the run is made of
    # short tests that even the workers out, instead of one long test alone.
    items.sort(key=lambda item: "slow" not in item.keywords)
    if connection.vendor == "postgresql":
        # What does not depend on the database runs once, in the SQLite pass
        # (make test always runs it): the pure unit tests, the browser tests
        # and the schema fuzzing. Two minutes of a PostgreSQL pass otherwise.
        once = pytest.mark.skip(reason="independent of the database: runs once, in the SQLite pass of make test")
        for item in items:
            if "once" in item.keywords or "browser" in item.keywords or _pure(item.path):
                item.add_marker(once)
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    for item in items:
        if "postgres_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def marker_dir(tmp_path):
    """A directory where tasks of the test app leave markers (``plumbing.markers`` reads them)."""
    path = tmp_path / "markers"
    path.mkdir()
    return str(path)


@pytest.fixture
def api(staff_user):
    """An API client of staff holding every scheduler permission (token authentication)."""
    return token_client(grant(staff_user))


@pytest.fixture
def anon():
    """An API client that sends no credentials."""
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def non_staff(plain_user):
    """An API client of a user who is not staff (token authentication)."""
    return token_client(plain_user)


@pytest.fixture
def enqueue_job(db):
    """Return a function that enqueues a job through the lifecycle service (``ADD`` with ``(1, 2)`` by default)."""
    from scheduler_app import lifecycle

    def enqueue(task=ADD, args=None, **options):
        if args is None:
            args = (1, 2) if task == ADD else ()
        job, _ = lifecycle.enqueue(task, list(args), options.pop("kwargs", None), **options)
        return job

    return enqueue


@pytest.fixture
def job_row(db):
    """Return a function that writes a job row in any state (test setup, not a transition under test)."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduler_app.models import Job, JobStatus

    def make(status=JobStatus.PENDING, **fields):
        now = timezone.now()
        defaults = {"task": ADD, "args": [1, 2], "execute_at": now}
        if status == JobStatus.RUNNING:
            defaults.update(
                attempts=1,
                started_at=now - timedelta(seconds=42),
                worker="host:1:abc",
                lease_expires_at=now + timedelta(seconds=30),
            )
        elif status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            defaults.update(attempts=1, started_at=now - timedelta(seconds=3), finished_at=now, worker="host:1:abc")
        elif status == JobStatus.CANCELLED:
            defaults.update(finished_at=now)
        defaults.update(fields)
        return Job.objects.create(status=status, **defaults)

    return make


@pytest.fixture
def set_status():
    """Return a function that puts an existing job in a state (test setup only)."""
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
