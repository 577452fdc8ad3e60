"""The ``scheduler`` pytest fixture (registered through the package's ``pytest11`` entry point).

    def test_report(scheduler):
        make_report.enqueue(day="2026-11-26")
        scheduler.assert_enqueued(make_report, kwargs={"day": "2026-11-26"})
        assert scheduler.drain()["succeeded"] == 1

It needs pytest-django's database access: it asks for the ``db`` fixture
(a test marked ``django_db(transaction=True)`` gets a transactional one).
"""

import pytest

# pytest loads this module before Django is set up: the helpers (models
# inside) are imported when first used.


class Scheduler:
    """The helpers of ``scheduler_app.testing``, on one database."""

    def __init__(self, using="default"):
        self.using = using

    def drain(self, queue=None, **options):
        from .helpers import drain

        return drain(queue, using=self.using, **options)

    def enqueued(self, task=None, **filters):
        from .helpers import enqueued

        return enqueued(task, using=self.using, **filters)

    def assert_enqueued(self, task=None, **filters):
        from .helpers import assert_enqueued

        return assert_enqueued(task, using=self.using, **filters)

    def refute_enqueued(self, task=None, **filters):
        from .helpers import refute_enqueued

        return refute_enqueued(task, using=self.using, **filters)


@pytest.fixture
def scheduler(request):
    """Run and inspect scheduler jobs from a test (see ``scheduler_app.testing``)."""
    if "transactional_db" not in request.fixturenames and "live_server" not in request.fixturenames:
        request.getfixturevalue("db")
    return Scheduler()


def pytest_collection_modifyitems(items):
    """Mark a test that asks for ``scheduler`` but no database fixture ``django_db``.

    pytest-django sets up the test database only for the tests it can see
    need one, from their marks and fixtures; ``scheduler`` asks for ``db``
    while the test runs, which it cannot see. A test file with nothing but
    ``scheduler`` then ran against the project's own database (make run's
    demo jobs were in it).
    """
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "scheduler" in names and item.get_closest_marker("django_db") is None:
            if not {"db", "transactional_db", "live_server"} & set(names):
                item.add_marker(pytest.mark.django_db)
