"""Direct psycopg connections for the dispatcher's own PostgreSQL sessions (LISTEN, the hot path)."""

import psycopg
from django.db import connections

# Connection parameters that only Django's wrapper understands.
_DJANGO_ONLY = ("cursor_factory", "context", "prepare_threshold", "pool", "server_side_binding")


def connect(using="default", **options):
    """Open an autocommit psycopg connection to Django's database ``using``."""
    params = connections[using].get_connection_params()
    params = {k: v for k, v in params.items() if k not in _DJANGO_ONLY}
    return psycopg.connect(**params, autocommit=True, **options)
