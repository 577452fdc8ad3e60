import pytest
from django.contrib.auth import get_user_model

# What a project gets from the installed package's pytest11 entry point.
pytest_plugins = ["scheduler_app.testing.pytest_plugin"]


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


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user(
        "staff", "staff@example.com", "pw-staff-123", is_staff=True
    )


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser(
        "admin", "admin@example.com", "pw-admin-123"
    )


@pytest.fixture
def plain_user(db):
    return get_user_model().objects.create_user("plain", "plain@example.com", "pw-plain-123")


def pytest_collection_modifyitems(config, items):
    from django.db import connection

    if connection.vendor == "postgresql":
        # What does not depend on the database runs once, in the SQLite pass
        # (make test always runs it): the pure unit tests, the browser tests
        # and the schema fuzzing. Two minutes of a PostgreSQL pass otherwise.
        once = pytest.mark.skip(reason="independent of the database: runs once, in the SQLite pass of make test")
        for item in items:
            if "once" in item.keywords or "browser" in item.keywords or "/tests/unit/" in str(item.path):
                item.add_marker(once)
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    for item in items:
        if "postgres_only" in item.keywords:
            item.add_marker(skip)
