"""A task outside any tasks.py module: the registry does not know it."""

from django.tasks import task


@task
def stray():
    return 1
