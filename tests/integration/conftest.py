import pytest

from .rawhttp import start_peers


@pytest.fixture
def marker_dir(tmp_path):
    path = tmp_path / "markers"
    path.mkdir()
    return str(path)


@pytest.fixture
def raw_peer():
    """Start a raw TCP peer for the webhook tests (rawhttp.RawPeer); each is closed at the end."""
    yield from start_peers()
