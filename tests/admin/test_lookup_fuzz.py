"""Issue 34, section 5: every change list of the app x lookups the database cannot answer: never a 500.

A lookup the admin cannot answer (a regex the database refuses, a number past
the column's range under any name of the field, a year past the calendar, a
JSON lookup SQLite lacks, a date that does not parse) is ignored or refused
with Django's ``?e=1`` redirect, on both databases, on every list of the app.
"""

import pytest
from django.contrib import admin
from django.urls import reverse

from scheduler_app import lifecycle
from scheduler_app.workflows import group, step
from tests.plumbing import ADD

from .test_query_strings import assert_not_an_error
from .test_query_strings import rows as rows

pytestmark = pytest.mark.django_db

BIG = str(2**70)
HOSTILE = [
    # regular expressions the database cannot compile
    *(f"{field}__regex=(" for field in ("task", "name", "hostname", "pk", "id", "status")),
    *(f"{field}__iregex=%5B" for field in ("task", "name", "queue", "pk")),
    # numbers past the range, under every name of an integer field (pk, id, relations, __in lists)
    f"pk__in={BIG}",
    f"pk__in=1,{BIG}",
    f"pk__gt={BIG}",
    f"pk__range=1,{BIG}",
    f"id__in=1,{BIG}",
    f"pid__in={BIG}",
    f"priority__in=1,{BIG}",
    f"workflow__pk={BIG}",
    f"schedule__pk__in={BIG}",
    f"rate_starts={BIG}",
    "attempts=1e400",
    # years and other parts of dates past the calendar, dates that do not parse
    "execute_at__year=99999",
    "created_at__year=-1",
    f"created_at__iso_year={BIG}",
    "updated_at__iso_year__lte=99999",
    "started_at__year__gt=99999",
    "last_heartbeat__year=99999",
    f"created_at__week={BIG}",
    "execute_at__date=2026-13-01",
    "execute_at__date__gt=99999-01-01",
    "execute_at__time=25:00",
    "created_at__range=2026-01-01,garbage",
    # JSON lookups (SQLite has neither __contains nor __contained_by for JSON)
    "args__contains=1",
    "tags__contains=a",
    "args__contained_by=1",
    "meta__has_key=a",
    "meta__a__b=1",
    "slots__contains=1",
    "callbacks__contains=1",
    "result__contains=1",
    "meta__a__regex=(",
]


def app_changelists():
    return sorted(m._meta.model_name for m in admin.site._registry if m._meta.app_label == "scheduler_app")


@pytest.fixture
def more_rows(rows):
    group(step(ADD, 1, 2), step(ADD, 3, 4)).enqueue(name="w")
    lifecycle.queues.ensure("default")


def test_every_model_admin_of_the_app_has_the_guard():
    from scheduler_app.admin.base import SchedulerModelAdmin

    mine = {m: a for m, a in admin.site._registry.items() if m._meta.app_label == "scheduler_app"}
    assert len(mine) >= 6
    assert all(isinstance(a, SchedulerModelAdmin) for a in mine.values()), mine


@pytest.mark.parametrize("query", HOSTILE)
def test_no_lookup_makes_an_app_change_list_fail(admin_client_, more_rows, query):
    for model in app_changelists():
        url = reverse(f"admin:scheduler_app_{model}_changelist") + "?" + query
        response = admin_client_.get(url)
        assert_not_an_error(response, url)
        if response.status_code == 302:
            assert admin_client_.get(response["Location"]).status_code == 200, url
