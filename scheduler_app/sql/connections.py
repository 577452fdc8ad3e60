"""Direct psycopg connections for the dispatcher's own PostgreSQL sessions (LISTEN, the hot path).

psycopg is optional (the ``postgres`` extra): on SQLite nothing here is used.
"""

from django.db import connections

try:
    import psycopg
except ImportError:  # a SQLite-only installation
    psycopg = None

# psycopg's errors that mean "the connection is gone": the loop retries.
TRANSIENT_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError) if psycopg else ()

# Connection parameters that only Django's wrapper understands.
_DJANGO_ONLY = ("cursor_factory", "context", "prepare_threshold", "pool", "server_side_binding")


def connect(using="default", **options):
    """Open an autocommit psycopg connection to Django's database ``using``."""
    params = connections[using].get_connection_params()
    params = {k: v for k, v in params.items() if k not in _DJANGO_ONLY}
    return psycopg.connect(**params, autocommit=True, **options)
