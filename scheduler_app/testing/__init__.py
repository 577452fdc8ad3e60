"""Test helpers for projects that use the scheduler: run jobs without a dispatcher, and look at what was enqueued.

They work inside an ordinary ``django.test.TestCase`` (one transaction,
nothing committed) as well as ``TransactionTestCase``, on SQLite and
PostgreSQL, because they run jobs in the calling thread and on its
connection, through the same service calls a dispatcher makes (claim,
run, finish)::

    from scheduler_app.testing import assert_enqueued, drain

    def test_signup_sends_the_welcome_mail(self):
        signup("ada@example.com")
        assert_enqueued(send_welcome, args=["ada@example.com"])
        assert drain() == {"succeeded": 1, "failed": 0, "cancelled": 0, "snoozed": 0}

With pytest, the ``scheduler`` fixture (registered by the package's pytest
plugin) offers the same functions: ``scheduler.drain()``,
``scheduler.assert_enqueued(...)``.
"""

# Loaded when first used: the pytest plugin (``testing.pytest_plugin``,
# the package's pytest11 entry point) is imported with this package before
# Django is set up, and the helpers import the models.
__all__ = ["assert_enqueued", "drain", "enqueued", "refute_enqueued"]


def __getattr__(name):
    if name in __all__ or name == "MAX_RUNS":
        from . import helpers

        return getattr(helpers, name)
    raise AttributeError(f"module 'scheduler_app.testing' has no attribute {name!r}")
