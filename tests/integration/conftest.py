import pytest


@pytest.fixture
def marker_dir(tmp_path):
    path = tmp_path / "markers"
    path.mkdir()
    return str(path)
