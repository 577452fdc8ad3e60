"""Bench settings for this project: the project's settings plus the bench app."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]  # noqa: F405
DEBUG = False  # no query log growing in memory during long runs
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
