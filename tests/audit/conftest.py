import pytest


@pytest.fixture
def admin_client_(client, superuser):
    client.force_login(superuser)
    return client
