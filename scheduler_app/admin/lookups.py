"""Query strings and object ids the admin cannot use never reach the database.

A change list's query string is anyone's to type. Django turns most bad
values into its "?e=1" redirect (the plain list with an error flag), but not
those the database refuses only when the query runs: a NUL character
(PostgreSQL), an integer past the column's range in a relation lookup
(SQLite), a date the calendar cannot hold. ``SafeLookupsMixin`` refuses them
before any query, the same way Django refuses a lookup on an unknown field;
``SafeChangeList`` turns the date arithmetic that overflows inside Django's
own filters into that refusal too, and so any lookup the database refuses
only when it runs the list's queries (a regular expression it cannot
compile, a year past the calendar, a JSON lookup SQLite lacks, a number
past the range under a name the check above does not know): the count and
the page are read in a savepoint, and an error there is Django's "?e=1"
answer when the query string filtered, searched or drilled down; a list
without any of these that fails is a bug, and stays a 500.
"""

from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ALL_VAR, IS_FACETS_VAR, IS_POPUP_VAR, ORDER_VAR, TO_FIELD_VAR, ChangeList
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import DatabaseError, connections, router, transaction
from django.db.models.constants import LOOKUP_SEP

from ..sql.timeouts import is_timeout

# Query string keys that choose how the list shows, not which rows it holds.
_NOT_LOOKUPS = {ORDER_VAR, ALL_VAR, IS_POPUP_VAR, TO_FIELD_VAR, IS_FACETS_VAR}


def unstorable(text):
    """Return whether ``text`` cannot be sent to a database as text (NUL, lone surrogates)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _integer_range(model, key, connection):
    """Return the (low, high) range of the integer column a lookup key compares, or None."""
    opts, field = model._meta, None
    for part in key.split(LOOKUP_SEP):
        try:
            field = opts.pk if part == "pk" else opts.get_field(part)
        except FieldDoesNotExist:
            break  # a lookup (exact, in, gte) or a transform: the field is known
        if not (field.is_relation and field.related_model):
            break
        opts = field.related_model._meta
    if field is None:
        return None
    if field.is_relation and field.related_model:
        field = field.target_field
    try:
        return connection.ops.integer_field_range(field.get_internal_type())
    except KeyError:
        return None


def _out_of_range(value, bounds):
    low, high = bounds
    for item in value.split(","):  # one value, or the list of an __in lookup
        item = item.strip()
        if item.lstrip("+-").isdigit() and not low <= int(item) <= high:
            return True
    return False


def refused_lookups(model, params):
    """Return the query string keys whose key or value no query can use."""
    connection = connections[router.db_for_read(model)]
    bad = []
    for key, values in params.lists():
        if unstorable(key) or any(unstorable(v) for v in values):
            bad.append(key)
            continue
        bounds = _integer_range(model, key, connection)
        if bounds and any(_out_of_range(v, bounds) for v in values):
            bad.append(key)
    return bad


class SafeChangeList(ChangeList):
    """A ChangeList whose filters' date arithmetic cannot overflow into a 500."""

    def get_filters(self, request):
        try:
            return super().get_filters(request)
        except (ValueError, OverflowError) as exc:
            # The date drill-down past year 9999 (Django adds a day or a year).
            raise IncorrectLookupParameters(exc) from exc

    def get_queryset(self, request, *args, **kwargs):
        try:
            return super().get_queryset(request, *args, **kwargs)
        except (ValueError, OverflowError, ValidationError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_results(self, request):
        if not (self.query or set(self.params) - _NOT_LOOKUPS):
            return super().get_results(request)  # the plain list: an error there is a bug, and stays a 500
        # In a savepoint: a statement PostgreSQL refuses must not leave the request's transaction broken.
        try:
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
                len(self.result_list)  # the page's query too (its rows cached), here rather than in the template
        except (DatabaseError, ValueError, OverflowError, TypeError) as exc:
            if is_timeout(exc):
                raise
            raise IncorrectLookupParameters(exc) from exc


class SafeLookupsMixin:
    """For a ModelAdmin: unusable lookups get Django's "?e=1" answer, unusable ids "does not exist"."""

    def get_changelist(self, request, **kwargs):
        return SafeChangeList

    def get_changelist_instance(self, request):
        # Called inside changelist_view's handler for IncorrectLookupParameters.
        bad = refused_lookups(self.model, request.GET)
        if bad:
            raise IncorrectLookupParameters(f"Unusable lookup values: {', '.join(map(repr, bad))}")
        return super().get_changelist_instance(request)

    def get_object(self, request, object_id, from_field=None):
        if not isinstance(object_id, str) or unstorable(object_id):
            return None
        bounds = _integer_range(
            self.model, from_field or self.model._meta.pk.name, connections[router.db_for_read(self.model)]
        )
        if bounds and _out_of_range(object_id, bounds):
            return None
        return super().get_object(request, object_id, from_field)
