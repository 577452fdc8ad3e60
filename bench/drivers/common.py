"""Helpers shared by the drivers (they run in either virtualenv)."""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def setup_django(settings):
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings)
    import django

    django.setup()


def emit(obj):
    sys.stdout.write("\nRESULT " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def create_stamp_table():
    from django.db import connection

    from bench import stamps

    with connection.cursor() as cursor:
        cursor.execute(stamps.DDL)


def wait_stamp(key, timeout=10.0, interval=0.0005):
    """Poll bench_stamp for ``key``; return its started time or None."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT started FROM bench_stamp WHERE key = %s", [key])
            row = cursor.fetchone()
            if row:
                return row[0]
            time.sleep(interval)
    return None
