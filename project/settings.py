"""Settings for the scheduler project.

Everything that differs between a laptop and production comes from the
environment: DATABASE_URL, SECRET_KEY, DEBUG, ALLOWED_HOSTS.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # Local development only: a fixed, clearly-insecure key.
    SECRET_KEY = "django-insecure-local-development-key-do-not-use-in-production"

ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # The scheduler and the one app it needs (API tokens).
    "rest_framework.authtoken",
    "scheduler_app",
    # This repository's demo tasks (not needed in your project).
    "scheduler_app.demo",
]

MIDDLEWARE = [
    # First: every answer under /api/ is JSON, also the errors Django raises before a view.
    "scheduler_app.api.middleware.APIErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"


def database_from_env():
    """Return the default database: DATABASE_URL, or SQLite in the project."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    else:
        config = {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Several threads and processes (web server, dispatcher, workers)
        # write to one file: WAL lets readers run beside the writer,
        # IMMEDIATE takes the write lock at BEGIN so two writers queue on the
        # busy timeout instead of failing with "database is locked" on upgrade.
        config.setdefault("OPTIONS", {}).update(
            {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": ("PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=30000;"),
            }
        )
        config.setdefault("TEST", {})
    return config


DATABASES = {"default": database_from_env()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGIN_URL = "admin:login"

# django.tasks: every @task function enqueues into the scheduler.
TASKS = {
    "default": {
        "BACKEND": "scheduler_app.backends.SchedulerBackend",
        "QUEUES": [q.strip() for q in os.environ.get("SCHEDULER_QUEUES", "default,slow").split(",") if q.strip()],
    }
}

# Scheduler defaults; see scheduler_app/conf.py for every key and its meaning.
SCHEDULER = {
    # See scheduler_app/conf.py: False = asynchronous commit of the
    # dispatcher's claims and results on PostgreSQL (faster; a PostgreSQL
    # crash may make the last ~0.2 s of jobs run again).
    "SYNCHRONOUS_COMMIT": env_bool("SCHEDULER_SYNCHRONOUS_COMMIT", True)
}


# The scheduler's loggers at SCHEDULER_LOG_LEVEL (INFO: the dispatcher's
# banner, a summary line per minute, retries; WARNING: failures, problems).
# A line per job start and end, the scheduler's and Django's own
# (django.tasks, from the task signals), is DEBUG detail: Django's lines
# show at DEBUG, and from WARNING up (a failed task's line is an ERROR).
log_level = os.environ.get("SCHEDULER_LOG_LEVEL", "INFO").upper()
tasks_log_level = log_level if log_level in ("DEBUG", "WARNING", "ERROR", "CRITICAL") else "WARNING"
# The console stays readable (project/console.py): the dev server leaves out
# the admin's polling and static files, the console the demo tasks' own lines.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "quiet_polling": {"()": "project.console.QuietPolling"},
        "no_demo_chatter": {"()": "project.console.NoDemoChatter"},
        "one_line_demo_failure": {"()": "project.console.OneLineDemoFailure"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["no_demo_chatter", "one_line_demo_failure"],
        },
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server", "filters": ["quiet_polling"]},
    },
    "loggers": {
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
        "scheduler_app": {"handlers": ["console"], "level": log_level, "propagate": False},
        "django.tasks": {"handlers": ["console"], "level": tasks_log_level, "propagate": False},
    },
}

MAILERS = {"default": {"BACKEND": os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")}}
