"""Tasks outside a `tasks` module: registered only through SCHEDULER["TASK_MODULES"]."""

from django.tasks import task


@task
def from_another_module(x):
    return x * 2
