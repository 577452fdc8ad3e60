import pytest

from tests.tasks.rawhttp import start_peers


@pytest.fixture
def raw_peer():
    """Start a raw TCP peer for the webhook tests (rawhttp.RawPeer); each is closed at the end."""
    yield from start_peers()
