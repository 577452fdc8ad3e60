"""The registry of runnable tasks.

The tasks the admin, the API and the dispatcher may run are exactly the
``django.tasks.Task`` objects defined in installed apps' ``tasks`` modules
and in the modules listed in ``SCHEDULER["TASK_MODULES"]`` (each inside an
installed app), collected once at startup. A name coming from a request is
only ever looked up here; nothing imports a path given by a user.
"""

import importlib
import inspect
import logging

from django.apps import apps
from django.tasks import Task
from django.utils.module_loading import module_has_submodule

from . import conf
from .validation.fields import shown
from .validation.options import options_of

logger = logging.getLogger(__name__)

# name -> Task; written once by autodiscover() in AppConfig.ready().
_tasks = {}


# Characters of a user's value an error message quotes; longer ones are cut.


class UnknownTask(LookupError):
    """The name is not a registered task."""

    def __init__(self, name):
        self.name = name
        super().__init__(
            f"{shown(name)} is not a registered task. Tasks must be @task functions in an "
            f"installed app's tasks.py (or a module in SCHEDULER['TASK_MODULES']); GET /api/tasks/ lists them."
        )


def task_modules():
    """Return the dotted paths of the modules whose tasks are registered.

    Each installed app's ``tasks`` module, then ``SCHEDULER["TASK_MODULES"]``
    (a module outside every installed app is not used: ``checks`` says so).
    """
    paths = [
        f"{app_config.name}.tasks"
        for app_config in apps.get_app_configs()
        if module_has_submodule(app_config.module, "tasks")
    ]
    for path in conf.get("TASK_MODULES"):
        if path not in paths and app_of(path) is not None:
            paths.append(path)
    return paths


def app_of(module_path):
    """Return the installed app whose package holds ``module_path``, or None."""
    for app_config in apps.get_app_configs():
        if module_path == app_config.name or module_path.startswith(app_config.name + "."):
            return app_config
    return None


def autodiscover():
    """Import the task modules and register the tasks they define."""
    found = {}
    for path in task_modules():
        module = importlib.import_module(path)
        for value in vars(module).values():
            if isinstance(value, Task) and value.func.__module__ == module.__name__:
                found[value.module_path] = value
    _tasks.clear()
    _tasks.update(found)
    logger.debug("registered %d tasks", len(found))


def get(name):
    """Return the registered Task called ``name`` or raise UnknownTask."""
    try:
        return _tasks[name]
    except (KeyError, TypeError):
        raise UnknownTask(name) from None


def options_for(name):
    """Return the ``@options`` of the registered task ``name`` (None when it is not registered)."""
    task = _tasks.get(name) if isinstance(name, str) else None
    return None if task is None else options_of(task)


def is_registered(name):
    return isinstance(name, str) and name in _tasks


def names():
    return sorted(_tasks)


def all_tasks():
    """Return the registered tasks sorted by name."""
    return [_tasks[n] for n in sorted(_tasks)]


def name_of(task):
    """Return the registry name of a Task (its module path)."""
    return task.module_path


def describe(task):
    """Return a JSON-friendly description of a task for the admin and the API."""
    params = inspect.signature(task.func).parameters
    if task.takes_context:
        params = list(params.values())[1:]
    else:
        params = list(params.values())
    signature = "(" + ", ".join(str(p) for p in params) + ")"
    return {
        "name": task.module_path,
        "queue": task.queue_name,
        "priority": task.priority,
        "doc": inspect.getdoc(task.func) or "",
        "signature": signature,
        "is_async": inspect.iscoroutinefunction(task.func),
        "takes_context": task.takes_context,
        "options": options_of(task).describe(),
    }


# Task paths an ambiguous name's refusal lists at most (and the jobs table is asked for at most one more).
MATCHES_SHOWN = 10


def paths_named(text):
    """Return the known task paths ``text`` means, sorted: a list filters take one of, or refuse.

    Known paths are the registered tasks' and those in the jobs table (a
    task removed since still has jobs). A known path means itself; any
    other text means the paths it ends at a dot: "echo" and "tasks.echo"
    both mean "myapp.tasks.echo". Nothing known: ``[]``.
    """
    from .models import Job  # the registry loads before the models are ready

    if text in _tasks or Job.objects.filter(task=text).exists():
        return [text]
    suffix = "." + text
    found = {name for name in _tasks if name.endswith(suffix)}
    stored = Job.objects.filter(task__endswith=suffix).order_by().values_list("task", flat=True).distinct()
    found.update(stored[: MATCHES_SHOWN + 1])
    return sorted(found)


def ambiguity(text, paths):
    """Return the refusal of a name that means several task paths."""
    listed = ", ".join(paths[:MATCHES_SHOWN]) + (", ..." if len(paths) > MATCHES_SHOWN else "")
    return f"{shown(text)} names more than one task: {listed}. Give the full path (or more of its end)."
