"""One small Django project for the peers; PEER selects which one is installed.

Environment: PEER (dtdb | procrastinate | djangoq), BENCH_DB (postgres
database name, or a path ending in .sqlite3), PEER_WORKERS (django-q2 only:
unset = its default).
"""

import os

PEER = os.environ["PEER"]
DB = os.environ["BENCH_DB"]
SECRET_KEY = "bench-only"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]

if DB.endswith(".sqlite3"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DB,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;",
            },
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": DB,
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
        }
    }

if PEER == "dtdb":
    INSTALLED_APPS += ["django_tasks_db", "bench.benchapp"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
elif PEER == "procrastinate":
    INSTALLED_APPS += ["procrastinate.contrib.django", "bench.peers.procapp"]
elif PEER == "djangoq":
    INSTALLED_APPS += ["django_q"]
    # save_limit 0 = keep every success row: the default (250) deletes older
    # results, and the harness counts finished jobs from that table.
    Q_CLUSTER = {"name": "bench", "orm": "default", "save_limit": 0}
    if os.environ.get("PEER_WORKERS"):
        Q_CLUSTER["workers"] = int(os.environ["PEER_WORKERS"])
else:
    raise RuntimeError(f"unknown PEER {PEER!r}")

LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
