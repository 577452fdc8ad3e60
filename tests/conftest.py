import pytest
from django.contrib.auth import get_user_model

# What a project gets from the installed package's pytest11 entry point.
pytest_plugins = ["scheduler_app.pytest_plugin"]


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
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    for item in items:
        if "postgres_only" in item.keywords:
            item.add_marker(skip)
