import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def _client(user):
    token = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(staff_user):
    """A client of staff holding every scheduler permission."""
    from tests.api.conftest import grant

    grant(staff_user)
    return _client(staff_user)


@pytest.fixture
def non_staff(plain_user):
    return _client(plain_user)
