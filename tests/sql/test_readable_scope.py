"""``sql/readable.py`` reads the app's rows leniently and leaves every other query as it was.

A table of the host project's (here a table made by hand, the app's tables
left out) holds the same odd values as one of the app's: the app's query
reads them, the host's query reads them as Django alone would (or fails as
it would), before and after the app's.
"""

import sqlite3

import pytest
from django.db import DataError, OperationalError, connection, transaction

from scheduler_app.models import Job
from scheduler_app.sql import readable
from scheduler_app.sql.readable import END_OF_TIME
from tests import planted

pytestmark = pytest.mark.django_db


def host_rows(value):
    """Return the rows of a host table whose one time column holds ``value`` (text as stored)."""
    kind = "timestamptz" if connection.vendor == "postgresql" else "datetime"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS host_stamp (at {kind}, note text)")
        cursor.execute("DELETE FROM host_stamp")
        cursor.execute(
            f"INSERT INTO host_stamp (at) VALUES (%s{'::' + kind if kind == 'timestamptz' else ''})", [value]
        )
        cursor.execute("SELECT at FROM host_stamp")
        return cursor.fetchall()


def app_time(job):
    return Job.objects.filter(pk=job.pk).values_list("execute_at", flat=True).get()


def test_a_time_past_the_years_reads_in_the_apps_query_and_as_django_reads_it_in_the_hosts():
    job = planted.world()["pending"]
    far = "10000-01-01 00:00:00" + ("+00" if connection.vendor == "postgresql" else "")
    planted.plant(Job, job.pk, execute_at=far)
    assert app_time(job) == END_OF_TIME
    if connection.vendor == "postgresql":
        with pytest.raises(DataError):  # psycopg's own loader, the connection's, refuses it
            host_rows(far)
    else:
        assert host_rows(far) == [(None,)]  # Django's converter: no match, None
    assert app_time(job) == END_OF_TIME  # and the app's again, after the host's


def test_the_connections_own_loaders_are_left_as_they_were():
    if connection.vendor != "postgresql":
        pytest.skip("psycopg's adapters: PostgreSQL")
    from psycopg.postgres import types
    from psycopg.pq import Format

    planted.world()
    assert Job.objects.exists()
    adapters = connection.connection.adapters
    for name in ("timestamptz", "timestamp", "date"):
        assert not getattr(adapters.get_loader(types[name].oid, Format.TEXT), "safe", False)


def test_sqlite_a_date_the_calendar_lacks_fails_the_hosts_query_as_before_and_not_the_apps():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's converters")
    job = planted.world()["pending"]
    planted.plant(Job, job.pk, execute_at="2026-02-30 10:00:00")
    with pytest.raises(ValueError):
        host_rows("2026-02-30 10:00:00")
    assert app_time(job) is None


def test_sqlite_the_hosts_converter_reads_every_value_of_the_hosts_queries(monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's converters")
    seen = []
    converter = sqlite3.converters["DATETIME"]
    monkeypatch.setattr(converter, "host", lambda data: seen.append(data) or "the host's")
    assert host_rows("2026-01-02 03:04:05") == [("the host's",)]
    assert seen == [b"2026-01-02 03:04:05"]
    planted.world()
    assert Job.objects.values_list("execute_at", flat=True)[:1].get() != "the host's"  # the app's own rule


def test_sqlite_a_converter_the_host_registers_later_is_kept():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's converters")
    before = sqlite3.converters["TIMESTAMP"]

    def own(data):
        return data

    try:
        sqlite3.register_converter("timestamp", own)
        readable.prepare(connection=connection)  # as for a connection made later
        assert sqlite3.converters["TIMESTAMP"] is own
    finally:
        sqlite3.converters["TIMESTAMP"] = before


def test_sqlite_text_that_is_not_utf8_reads_in_the_apps_query_and_fails_the_hosts_as_before():
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL checks what it stores")
    job = planted.world()["pending"]
    host_rows("2026-01-02 03:04:05")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE scheduler_app_job SET task = CAST(X'626164FF' AS TEXT) WHERE id = %s", [job.pk])
        cursor.execute("UPDATE host_stamp SET note = CAST(X'626164FF' AS TEXT)")
    assert Job.objects.values_list("task", flat=True).get(pk=job.pk) == "bad\ufffd"
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SELECT note FROM host_stamp")
        cursor.fetchall()
