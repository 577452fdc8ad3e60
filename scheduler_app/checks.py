"""System checks: settings the scheduler cannot work with are reported at start-up.

``manage.py check``, ``runserver``, ``rundispatcher`` and every other command
run them, so a bad queue name or a lease of zero is one clear line before
anything starts, not a ``NoReverseMatch`` on the dashboard or a dispatcher
that spins. Registered in ``AppConfig.ready``; each rule's wording is the one
the rule gives everywhere (``validation.fields``, ``validation.settings``).

    E001  a queue name in TASKS[...]["QUEUES"] does not match the pattern
    E002  TASKS has no scheduler backend
    E003  the scheduler's SQLite database is in memory
    E004  SCHEDULER["RETENTION"] is not a mapping of finished statuses to ages
    E005  a number or flag in SCHEDULER is of the wrong type or out of range
    E006  a WEBHOOK_* setting is of the wrong type or out of range
    E007  another list in SCHEDULER (EMAIL_FROM_ALLOWED, RUN_COMMAND_ALLOWED) is wrong
    E008  SCHEDULER is not a dict
    E009  a SCHEDULER["TASK_MODULES"] entry is not a module of an installed app
    E010  an app the scheduler needs is not in INSTALLED_APPS
    E011  SCHEDULER["QUEUES"] is not queue names mapped to limits and a mode
    E012  SCHEDULER["ROUTES"] is not task paths or globs mapped to a queue and a priority
    E013  a scheduler backend's TASKS alias is longer than a job's ``backend`` column
    W001  SCHEDULER has a key the scheduler does not know (a typo?)
    W002  SCHEDULER has a key that was renamed (ALLOWED_COMMANDS: RUN_COMMAND_ALLOWED)
    W003  MIDDLEWARE lacks the API's APIErrorsMiddleware (some errors under /api/ would be HTML)
"""

from django.conf import settings
from django.core import checks
from django.core.exceptions import ValidationError
from django.utils.module_loading import import_string

from . import conf
from .lifecycle.building import QUEUE
from .validation.settings import DECLARED, RENAMED
from .vocabulary import bounds

TAG = "scheduler"
BACKEND_PATH = "scheduler_app.backends.SchedulerBackend"


def _message(exc):
    return " ".join(exc.messages)


def _scheduler_aliases():
    """Return ``{alias: TASKS entry}`` of the task backends that are this scheduler's."""
    from .backends import SchedulerBackend

    found = {}
    for alias, entry in (getattr(settings, "TASKS", None) or {}).items():
        try:
            backend = import_string(entry.get("BACKEND", ""))
        except (ImportError, AttributeError, TypeError):
            continue  # Django's own task checks report that
        if isinstance(backend, type) and issubclass(backend, SchedulerBackend):
            found[alias] = entry
    return found


def check_backends(app_configs=None, **kwargs):
    errors = []
    aliases = _scheduler_aliases()
    if not aliases:
        errors.append(
            checks.Error(
                "TASKS has no scheduler backend: nothing can be enqueued into the scheduler.",
                hint=f'Add {{"default": {{"BACKEND": "{BACKEND_PATH}", "QUEUES": ["default"]}}}} to TASKS.',
                id="scheduler_app.E002",
            )
        )
    for alias, entry in aliases.items():
        queues = entry.get("QUEUES", ["default"])
        if isinstance(queues, (str, bytes)) or not hasattr(queues, "__iter__"):
            queues = [queues]  # a lone name where a list belongs: judged as one name
        for name in queues:
            if not QUEUE.well_formed(name):
                errors.append(
                    checks.Error(
                        f"TASKS[{alias!r}]['QUEUES'] has the queue name {name!r}: {QUEUE.shape}.",
                        hint=f"Rename it to match {bounds.QUEUE_NAME_PATTERN} (SCHEDULER_QUEUES in the environment sets the default backend's).",
                        id="scheduler_app.E001",
                    )
                )
        if len(str(alias)) > bounds.BACKEND_ALIAS_MAX:
            errors.append(
                checks.Error(
                    f"The TASKS alias {str(alias)[:40]!r}... is longer than {bounds.BACKEND_ALIAS_MAX} characters: "
                    "a job keeps the alias of the backend it was enqueued through.",
                    hint="Give the scheduler backend a shorter alias.",
                    id="scheduler_app.E013",
                )
            )
        database = (entry.get("OPTIONS") or {}).get("database", "default")
        db = settings.DATABASES.get(database) or {}
        if _in_memory_sqlite(db):
            errors.append(
                checks.Error(
                    f"The scheduler's database {database!r} is an in-memory SQLite database: "
                    "dispatchers and the web server could not share it.",
                    hint="Give the database a file name (DATABASE_URL=sqlite:///path/db.sqlite3), or use PostgreSQL.",
                    id="scheduler_app.E003",
                )
            )
    return errors


def _in_memory_sqlite(db):
    name = db.get("NAME")
    if not str(db.get("ENGINE", "")).endswith("sqlite3"):
        return False
    if isinstance(name, str) and name.startswith("file:memorydb_"):
        return False  # Django's own test database (manage.py test): one process, by design
    return not name or (isinstance(name, str) and (name == ":memory:" or "mode=memory" in name))


def check_settings(app_configs=None, **kwargs):
    overrides = getattr(settings, "SCHEDULER", None)
    if overrides is None:
        return []
    if not isinstance(overrides, dict):
        return [
            checks.Error(
                "SCHEDULER must be a dict.",
                hint="See docs/CONFIGURATION.md (validation/settings.py declares them).",
                id="scheduler_app.E008",
            )
        ]
    errors = []
    for key in sorted(set(overrides) & set(RENAMED)):
        # A warning, not an error: the old key is ignored, so the change
        # fails closed (fewer commands run), and nothing else stops.
        errors.append(
            checks.Warning(
                f"SCHEDULER[{key!r}] was renamed {RENAMED[key]} and is ignored: "
                f"only what SCHEDULER[{RENAMED[key]!r}] lists is allowed (nothing by default).",
                hint=f"Rename the key to {RENAMED[key]}, keeping only what jobs must be allowed to run.",
                id="scheduler_app.W002",
            )
        )
    for key in sorted(set(overrides) - set(DECLARED) - set(RENAMED)):
        errors.append(
            checks.Warning(
                f"SCHEDULER[{key!r}] is not a scheduler setting and is ignored.",
                hint=f"Known settings: {', '.join(sorted(DECLARED))}.",
                id="scheduler_app.W001",
            )
        )
    for key, setting in DECLARED.items():
        if key not in overrides:
            continue
        try:
            setting.rule.check(overrides[key])
        except ValidationError as exc:
            errors.extend(_setting_errors(key, setting, exc))
    return errors


_HINTS = {
    "RETENTION": 'e.g. {"succeeded": timedelta(days=14), "failed": timedelta(days=30)}',
    "ROUTES": 'e.g. {"billing.tasks.*": {"queue": "billing", "priority": 10}}',
}


def _setting_errors(key, setting, exc):
    """Return the system check errors of a setting's refusal: one per message for RETENTION, else one."""
    hint = _HINTS.get(key, "See docs/CONFIGURATION.md (validation/settings.py declares them).")
    ident = f"scheduler_app.{setting.check_id}"
    if key == "RETENTION":
        return [
            checks.Error(f"SCHEDULER['RETENTION']{'' if m.startswith('[') else ' '}{m}", hint=hint, id=ident)
            for m in exc.messages
        ]
    return [checks.Error(f"SCHEDULER[{key!r}]: {_message(exc)}", hint=hint, id=ident)]


# The apps the scheduler needs besides itself: the admin it lives in (with
# what the admin needs) and DRF's tokens for the API.
REQUIRED_APPS = {
    "django.contrib.admin": "the admin pages and the dashboard",
    "django.contrib.auth": "users and permissions",
    "django.contrib.contenttypes": "permissions",
    "django.contrib.sessions": "the admin's logins",
    "django.contrib.messages": "the admin's messages",
    "django.contrib.staticfiles": "the dashboard's scripts and styles",
    "rest_framework.authtoken": "the API's 'Authorization: Token' keys",
}


def check_apps(app_configs=None, **kwargs):
    from django.apps import apps

    return [
        checks.Error(
            f"{name} is not in INSTALLED_APPS; the scheduler needs it for {why}.",
            hint=f"Add {name!r} to INSTALLED_APPS (the README's 'Add to an existing project' lists them).",
            id="scheduler_app.E010",
        )
        for name, why in REQUIRED_APPS.items()
        if not apps.is_installed(name)
    ]


API_ERRORS_MIDDLEWARE = "scheduler_app.api.middleware.APIErrorsMiddleware"


def check_middleware(app_configs=None, **kwargs):
    if API_ERRORS_MIDDLEWARE in (getattr(settings, "MIDDLEWARE", None) or ()):
        return []
    return [
        checks.Warning(
            f"MIDDLEWARE lacks {API_ERRORS_MIDDLEWARE}: a Host not in ALLOWED_HOSTS and a server error "
            "under the API's path answer Django's HTML pages, not JSON.",
            hint=f"Put {API_ERRORS_MIDDLEWARE!r} first in MIDDLEWARE (the README's setup).",
            id="scheduler_app.W003",
        )
    ]


def check_task_modules(app_configs=None, **kwargs):
    from importlib.util import find_spec

    from . import registry

    if not isinstance(getattr(settings, "SCHEDULER", None) or {}, dict):
        return []  # check_settings reports it
    errors = []
    modules = conf.get("TASK_MODULES")
    if not isinstance(modules, (list, tuple)):
        return []  # check_settings reports the type
    for path in modules:
        if not isinstance(path, str):
            continue
        problem = None
        if registry.app_of(path) is None:
            problem = "is not inside an installed app, so its tasks are not registered"
        else:
            try:
                found = find_spec(path)
            except (ImportError, ValueError):
                found = None
            if found is None:
                problem = "cannot be imported"
        if problem:
            errors.append(
                checks.Error(
                    f"SCHEDULER['TASK_MODULES']: {path!r} {problem}.",
                    hint="List dotted paths of modules inside installed apps, e.g. 'billing.jobs'.",
                    id="scheduler_app.E009",
                )
            )
    return errors


def register():
    """Register the checks (from ``AppConfig.ready``)."""
    checks.register(check_apps, TAG)
    checks.register(check_backends, TAG)
    checks.register(check_settings, TAG)
    checks.register(check_task_modules, TAG)
    checks.register(check_middleware, TAG)
