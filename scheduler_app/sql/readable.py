"""Any stored row reads without an error, and any time read can be shown.

Rows can be written around the service (SQL by hand, a restore, another
program, an older version), and a page that lists one must not fail for
everyone. What the drivers cannot turn into Python values, this module
turns into the nearest value Python holds, in the app's own queries (those
that name its tables): ``install`` (the app's ``ready`` calls it) adds an
execute wrapper, ``read_app_rows``, to every Django connection, and the
wrapper leaves every other query as it was:

* **Times past Python's range.** PostgreSQL holds years up to 294276,
  ``infinity``, ``-infinity`` and BC dates, which psycopg refuses to load
  (DataError). ``timestamptz``, ``timestamp`` and ``date`` values read as
  the end of time they passed: ``END_OF_TIME`` (``datetime.max``, UTC) for
  year 10000 and later and ``infinity``, ``START_OF_TIME``
  (``datetime.min``, UTC) for BC dates and ``-infinity``. On SQLite a time
  is text: a year of five digits reads as ``END_OF_TIME``, a negative year
  as ``START_OF_TIME``, and text that is no time at all as None (as Django
  reads it), where Django's parser raised for a date the calendar lacks
  (2026-02-30).
* **Text that is not UTF-8** (SQLite only: PostgreSQL checks what it
  stores) reads with U+FFFD for each bad byte, where sqlite3 raised.
* **JSON** of the app's JSON fields (``json_reader``): lone surrogates and
  NUL (SQLite stores ``\\udcff`` and ``\\u0000`` escapes) become U+FFFD, and
  a document nested more than ``bounds.JSON_READ_DEPTH_MAX`` levels deep
  reads as its text, as Django reads text that is not JSON (no encoder
  that shows it could recurse that deep).

Another model's reads, a connection's own psycopg adapters and what the
host's sqlite3 converters return are left as they were (sqlite3 converts by
type name for the whole process: the app's converter of ``datetime`` and
``timestamp`` calls the one it found for any query but the app's).

Times near either end may still not exist in the site's time zone
(``END_OF_TIME`` is year 10000 in Tokyo): ``in_zone`` is how pages convert
one.

And what the readers of a value the drivers did read need: ``error_entries``,
``worker_queues`` and ``worker_slots`` read JSON of another shape than the
service writes; ``finite`` turns the NaN and infinities a float column can
hold into None, for JSON, which has no words for them.
"""

import functools
import json
import math
import operator
import re
import sqlite3
import threading
from datetime import UTC, date, datetime

from django.db.backends.signals import connection_created
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..vocabulary.bounds import JSON_READ_DEPTH_MAX
from ..vocabulary.storable import clean_value

END_OF_TIME = datetime.max.replace(tzinfo=UTC)
START_OF_TIME = datetime.min.replace(tzinfo=UTC)


def in_zone(value, zone=None):
    """Return aware ``value`` in ``zone`` (default: the current one), or in UTC where that zone has no such date.

    ``END_OF_TIME`` in Asia/Tokyo would be in year 10000: shown in UTC instead.
    """
    try:
        return timezone.localtime(value, zone)
    except OverflowError:
        pass
    try:
        return value.astimezone(UTC)
    except OverflowError:  # an offset of its own past the end (an error entry's time text): as it is
        return value


# -- JSON ---------------------------------------------------------------------

# What a JSON text may hold that decodes to something no page can show: a
# surrogate's escape (a pair decodes to one character, which cleaning keeps)
# or a NUL's; or a raw NUL (JSON refuses it unescaped: read leniently below).
_ESCAPES = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class StoredJSONDecoder(json.JSONDecoder):
    """Decode a stored JSON document into values every page can show (see the module's text)."""

    def decode(self, s, *args, **kwargs):
        try:
            value = super().decode(s, *args, **kwargs)
        except RecursionError:
            value = _TOO_DEEP
        except json.JSONDecodeError:
            if "\x00" not in s:
                raise
            value = _LENIENT.decode(s)  # control characters inside strings (what SQLite lets in)
        # The cheap tests first: most documents are short and plain.
        if value is _TOO_DEEP or (
            len(s) > 2 * JSON_READ_DEPTH_MAX
            and s.count("[") + s.count("{") > JSON_READ_DEPTH_MAX
            and _deeper(value, JSON_READ_DEPTH_MAX)
        ):
            # Django's JSONField reads a document it cannot decode as its text;
            # one this deep would make every encoder after it recurse too far.
            raise json.JSONDecodeError(f"nested more than {JSON_READ_DEPTH_MAX} levels deep", s, 0)
        if "\x00" in s or ("\\u" in s and _ESCAPES.search(s)):
            return clean_value(value)
        return value


_TOO_DEEP = object()


def _deeper(value, limit):
    """Return whether JSON ``value`` nests more than ``limit`` levels deep (without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if isinstance(child, (dict, list)))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return False


_READER = StoredJSONDecoder()
_LENIENT = json.JSONDecoder(strict=False)


def json_reader(**kwargs):
    """The ``decoder`` of the app's JSON fields: one shared decoder, not a new one per value."""
    return _READER


# -- JSON of another shape than the service writes -----------------------------------

ERROR_KEYS = ("attempt", "time", "worker", "exception_class", "message", "traceback")


def _text(value):
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)[:10_000]


def error_entries(errors):
    """Return a job's stored ``errors`` as entries every page can show.

    Each is ``{attempt, time, worker, exception_class, message, traceback}``:
    ``attempt`` an int or None, the rest text. Whatever else a row holds
    (a text, an object, entries that are not objects) is read as entries
    whose message is its JSON text.
    """
    if not isinstance(errors, list):
        errors = [] if errors is None else [errors]
    entries = []
    for entry in errors:
        if not isinstance(entry, dict):
            entry = {"message": entry}
        attempt = entry.get("attempt")
        entries.append(
            {
                **{key: _text(entry.get(key)) for key in ERROR_KEYS[1:]},
                "attempt": attempt if type(attempt) is int else None,
            }
        )
    return entries


def worker_queues(queues):
    """Return a dispatcher's stored ``queues`` as a list of names (what is not a name is left out)."""
    return [q for q in queues if isinstance(q, str)] if isinstance(queues, list) else []


def worker_slots(slots):
    """Return a dispatcher's stored ``slots`` as ``{queue or "*": count}`` (what is not a count is left out)."""
    if not isinstance(slots, dict):
        return {}
    return {q: n for q, n in slots.items() if type(n) is int and 0 <= n <= SLOTS_SHOWN_MAX}


# More slots than any dispatcher has (bounds.CONCURRENCY_MAX per group).
SLOTS_SHOWN_MAX = 10**6


def finite(value):
    """Return JSON-like ``value`` with NaN and infinities (JSON has no words for them) as None.

    A float column may hold them (PostgreSQL's float8; a check constraint's
    ``> 0`` lets NaN and Infinity by), and numbers computed from them follow.
    Iterative; containers are copied.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if not isinstance(value, (dict, list, tuple)):
        return value
    root = [value]
    stack = [(value, root, 0)]
    while stack:
        source, parent, slot = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        copy = {} if isinstance(source, dict) else [None] * len(source)
        parent[slot] = copy
        for key, child in items:
            if isinstance(child, (dict, list, tuple)):
                copy[key] = None
                stack.append((child, copy, key))
            else:
                copy[key] = None if isinstance(child, float) and not math.isfinite(child) else child
    return root[0]


# -- times ------------------------------------------------------------------------

# The years Python holds have at most four digits; PostgreSQL's text of an
# earlier one ends in " BC".
_LATER = re.compile(rb"^\+?\d{5,}-|^infinity$")
_EARLIER = re.compile(rb"^-|\sBC$")


def _edge(data):
    """Return +1 for the text of a time after year 9999, -1 for one before year 1, else 0."""
    data = bytes(data).strip()
    if _LATER.search(data):
        return 1
    if _EARLIER.search(data):
        return -1
    return 0


@functools.cache
def _safe_loader(base, after, before):
    """Return a psycopg Loader that loads as ``base`` does, and ``after``/``before`` where ``base`` finds no date."""
    from psycopg import DataError
    from psycopg.adapt import Loader

    class SafeLoader(Loader):
        # Django compares a cursor's timestamptz loader's zone with the
        # connection's and re-registers its own when they differ.
        timezone = getattr(base, "timezone", None)
        safe = True

        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            self._base = base(oid, context)

        def load(self, data):
            try:
                return self._base.load(data)
            except DataError:
                edge = _edge(data)
                if not edge:
                    raise
                return after if edge > 0 else before

    return SafeLoader


@functools.cache
def _pg_time_types():
    """Return psycopg's text format and ``(oid, after, before, zoned)`` of each time type (looked up once)."""
    from psycopg.postgres import types
    from psycopg.pq import Format

    kinds = [("timestamptz", None, None), ("timestamp", datetime.max, datetime.min), ("date", date.max, date.min)]
    return Format.TEXT, [(types[name].oid, after, before, name == "timestamptz") for name, after, before in kinds]


def _prepare_postgresql_cursor(cursor):
    """Make one psycopg cursor (the app's query's) load times past Python's years; its connection is left as it is."""
    text, kinds = _pg_time_types()
    adapters = cursor.adapters
    for oid, after, before, zoned in kinds:
        base = adapters.get_loader(oid, text)
        if getattr(base, "safe", False):
            continue
        if zoned:  # in the zone Django's loader gives
            zone = getattr(base, "timezone", None)
            after, before = datetime.max.replace(tzinfo=zone), datetime.min.replace(tzinfo=zone)
        adapters.register_loader(oid, _safe_loader(base, after, before))


def read_sqlite_time(text):
    """Return SQLite's text of a time as a datetime (naive, as stored), an end of time (aware), or None."""
    try:
        value = parse_datetime(text)
    except ValueError:  # well formed, but no such date (2026-02-30 10:00)
        value = None
    if value is None:
        edge = _edge(text.encode("utf-8", "replace"))
        value = END_OF_TIME if edge > 0 else START_OF_TIME if edge < 0 else None
    return value


# Whether the query this thread ran last on SQLite is one of the app's: sqlite3
# converts a declared column's values (by type name, for the whole process)
# as the rows are fetched, after the statement ran.
_reading = threading.local()


def _app_reads():
    return getattr(_reading, "app", False)


class _SQLiteTimeConverter:
    """sqlite3's converter of a declared time column: the one there before, and the app's rule for the app's rows.

    A query that is not the app's gets exactly what the converter found
    (the host project's, or Django's) returns or raises.
    """

    def __init__(self, host):
        self.host = host

    def __call__(self, data):
        if not _app_reads():
            return self.host(data)
        return read_sqlite_time(data.decode("utf-8", "replace"))


# Values of a declared datetime column (Django's converters are registered by type name).
_SQLITE_TYPES = ("DATETIME", "TIMESTAMP")


@functools.cache
def _take_sqlite_converters():
    """Put the app's converter in front of the one of each time type, once: one the host registers later wins."""
    for name in _SQLITE_TYPES:
        found = sqlite3.converters.get(name)
        if found is not None and not isinstance(found, _SQLiteTimeConverter):
            sqlite3.converters[name] = _SQLiteTimeConverter(found)


def _prepare_sqlite(connection):
    _take_sqlite_converters()
    # Text a query computes (MIN(execute_at)) has no declared type: Django's
    # own conversion parses it, and would raise on the app's rows.
    ops = connection.ops
    if not getattr(ops.convert_datetimefield_value, "safe", False):
        convert = type(ops).convert_datetimefield_value

        def convert_datetimefield_value(value, expression, connection):
            if isinstance(value, str) and _app_reads():
                value = read_sqlite_time(value)
            return convert(ops, value, expression, connection)

        convert_datetimefield_value.safe = True
        ops.convert_datetimefield_value = convert_datetimefield_value


def _prepare_sqlite_query(connection, app):
    """Read the app's rows leniently and every other query's as before, on this SQLite connection."""
    _reading.app = app
    raw = connection.connection
    if app and raw.text_factory is not _SQLITE_TEXT:
        connection.readable_text_factory = raw.text_factory  # the host's, put back for its next query
        raw.text_factory = _SQLITE_TEXT
    elif not app and raw.text_factory is _SQLITE_TEXT:
        raw.text_factory = getattr(connection, "readable_text_factory", str)


# data.decode("utf-8", "replace") without a Python frame per value (a
# lambda, or a partial with keywords, cost more).
_SQLITE_TEXT = operator.methodcaller("decode", "utf-8", "replace")

# Every table of the app is named after it (no model sets ``db_table``).
APP_TABLES = "scheduler_app_"


def read_app_rows(execute, sql, params, many, context):
    """An execute wrapper: a query that names one of the app's tables reads what its driver cannot; others as before."""
    connection = context["connection"]
    app = isinstance(sql, str) and APP_TABLES in sql
    if connection.vendor == "postgresql":
        if app:
            _prepare_postgresql_cursor(context["cursor"].cursor)
    elif connection.vendor == "sqlite":
        _prepare_sqlite_query(connection, app)
    return execute(sql, params, many, context)


def prepare(sender=None, connection=None, **kwargs):
    """Wrap ``connection``'s queries with :func:`read_app_rows` (``connection_created``'s receiver)."""
    if read_app_rows not in connection.execute_wrappers:
        connection.execute_wrappers.append(read_app_rows)
    if connection.vendor == "sqlite":
        _prepare_sqlite(connection)


def install():
    """Prepare every Django connection, those open now and those made later, to read the app's rows leniently.

    Only the app's queries change: another model's reads, the connection's
    own adapters and the host's converters stay as they were.
    """
    from django.db import connections

    connection_created.connect(prepare, dispatch_uid="scheduler_app.readable")
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            prepare(connection=connection)
