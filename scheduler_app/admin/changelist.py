"""Change-list machinery that stays cheap with millions of rows.

A paginator that counts up to a cap, list filters that never SELECT DISTINCT
over the table, a date filter with a from/before pair, and a date drill-down
computed from the calendar. The job admin uses them all. And ``site_view``,
which puts a model admin's own extra views behind the admin site's checks.
"""

import calendar
import datetime
from functools import update_wrapper

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.paginator import Paginator
from django.db import DatabaseError, transaction
from django.utils import formats, timezone
from django.utils.dateparse import parse_date
from django.utils.functional import cached_property
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe
from django.utils.text import capfirst

from .. import conf, registry
from ..models import Queue, Schedule
from ..observability import lateness
from ..sql.readable import in_zone
from . import visibility
from .job_fields import mark_held
from .lookups import SafeChangeList


class CappedCountPaginator(Paginator):
    """Count at most ``cap`` rows: ``SELECT COUNT(*) FROM (... LIMIT cap + 1)``.

    A full COUNT(*) of a big jobs table takes seconds on every page view;
    past the cap the list says "more than 10,000" and pages up to the cap.
    """

    cap = 10_000

    @cached_property
    def count(self):
        counted = self.object_list.order_by()[: self.cap + 1].count()
        self.capped = counted > self.cap
        return min(counted, self.cap)

    capped = False


class QueueFilter(admin.SimpleListFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        names = set(conf.known_queues()) | set(Queue.objects.values_list("name", flat=True))
        return [(n, n) for n in sorted(names)]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(queue=self.value())
        return queryset


class TaskFilter(admin.SimpleListFilter):
    """Registered tasks (no SELECT DISTINCT over the whole table)."""

    title = "task"
    parameter_name = "task"

    def lookups(self, request, model_admin):
        # Short names where they are unambiguous, the whole path on hover;
        # long dotted paths may break after their dots.
        names = registry.names()
        shorts = [n.rpartition(".")[2] for n in names]
        return [
            (
                n,
                format_html('<span title="{}">{}</span>', n, short)
                if shorts.count(short) == 1
                else mark_safe("<wbr>.".join(escape(p) for p in n.split("."))),
            )
            for n, short in zip(names, shorts, strict=True)
        ]

    def queryset(self, request, queryset):
        """Filter by the task ``?task=`` names: a path, or its end when one known task has it (``registry.paths_named``)."""
        value = self.value()
        if not value:
            return queryset
        paths = registry.paths_named(value)
        if len(paths) > 1:
            messages.error(request, registry.ambiguity(value, paths))
            return queryset.none()
        return queryset.filter(task=paths[0] if paths else value)


class ScheduleFilter(admin.SimpleListFilter):
    """The jobs a schedule made (the partial index on schedule_id serves it)."""

    title = "schedule"
    parameter_name = "schedule"
    MAX_CHOICES = 100

    def lookups(self, request, model_admin):
        if not visibility.may_view(request.user, Schedule):
            return []  # their names are the schedules' (a link from a schedule's page still filters)
        rows = Schedule.objects.order_by("name").values_list("pk", "name")[: self.MAX_CHOICES]
        return [(str(pk), name) for pk, name in rows]

    def has_output(self):
        # Shown when a schedule exists or one is selected (a link from the schedule page).
        return bool(self.lookup_choices) or self.value() is not None

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit():
            return queryset.none()
        return queryset.filter(schedule_id=int(value))


class DateRangeFilter(admin.DateFieldListFilter):
    """The admin's date presets plus a from/before pair of dates."""

    template = "admin/scheduler_app/date_range_filter.html"

    def queryset(self, request, queryset):
        for key, values in list(self.used_parameters.items()):
            value = values[-1] if isinstance(values, list) else values
            if value in ("", None):
                del self.used_parameters[key]  # an empty date box means "no bound"
                continue
            try:
                day = parse_date(value) if isinstance(value, str) and len(value) == 10 else None
                if day is not None:
                    midnight = timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))
                    midnight.astimezone(datetime.UTC)  # stored in UTC: must exist there too
                    self.used_parameters[key] = [midnight]
            except (ValueError, OverflowError) as exc:  # 2026-02-30, 0000-01-01
                raise IncorrectLookupParameters(exc) from exc
        return super().queryset(request, queryset)

    def choices(self, changelist):
        yield from super().choices(changelist)
        current = {}
        for key in (self.lookup_kwarg_since, self.lookup_kwarg_until):
            value = changelist.params.get(key, "")
            current[key] = value[:10] if value else ""
        keep = [
            (k, v)
            for k, v in changelist.params.items()
            if k not in (self.lookup_kwarg_since, self.lookup_kwarg_until, getattr(self, "lookup_kwarg_isnull", None))
        ]
        yield {
            "range_form": True,
            "since_name": self.lookup_kwarg_since,
            "until_name": self.lookup_kwarg_until,
            "since": current[self.lookup_kwarg_since],
            "until": current[self.lookup_kwarg_until],
            "keep": keep,
            "display": "",
            "selected": False,
            "query_string": "",
        }


class JobChangeList(SafeChangeList):
    def get_queryset(self, request, *args, **kwargs):
        # The list shows none of these; errors hold tracebacks (up to 20 kB each).
        return super().get_queryset(request, *args, **kwargs).defer("args", "kwargs", "result", "errors")

    def get_results(self, request):
        super().get_results(request)
        # Which pending jobs their concurrency key holds back: one query for the page, none without keys.
        self.result_list = mark_held(list(self.result_list))
        # Why late pending jobs wait, for the whole page at once (the rows render from this cache).
        lateness.attach(list(self.result_list))

    @cached_property
    def calendar_hierarchy(self):
        """Date drill-down links from the calendar, not from SELECT DISTINCT dates.

        Django's date_hierarchy scans the table for the dates that occur;
        this one offers every year/month/day and costs no query.
        """
        field = self.date_hierarchy
        names = {part: f"{field}__{part}" for part in ("year", "month", "day")}
        try:
            year, month, day = (
                int(self.params[names[p]]) if self.params.get(names[p]) else None for p in ("year", "month", "day")
            )
        except ValueError:
            year = month = day = None

        def link(filters):
            return self.get_query_string(filters, [f"{field}__"])

        base = {"show": True, "field_name": self.opts.get_field(field).verbose_name}
        if year and month and day:
            date = datetime.date(year, month, day)
            return {
                **base,
                "back": {
                    "link": link({names["year"]: year, names["month"]: month}),
                    "title": capfirst(formats.date_format(date, "YEAR_MONTH_FORMAT")),
                },
                "choices": [{"title": capfirst(formats.date_format(date, "MONTH_DAY_FORMAT"))}],
            }
        if year and month:
            days = calendar.monthrange(year, month)[1]
            return {
                **base,
                "back": {"link": link({names["year"]: year}), "title": str(year)},
                "choices": [
                    {
                        "link": link({names["year"]: year, names["month"]: month, names["day"]: d}),
                        "title": capfirst(formats.date_format(datetime.date(year, month, d), "MONTH_DAY_FORMAT")),
                    }
                    for d in range(1, days + 1)
                ],
            }
        if year:
            return {
                **base,
                "back": {"link": link({}), "title": "All dates"},
                "choices": [
                    {
                        "link": link({names["year"]: year, names["month"]: m}),
                        "title": capfirst(formats.date_format(datetime.date(year, m, 1), "YEAR_MONTH_FORMAT")),
                    }
                    for m in range(1, 13)
                ],
            }
        return {
            **base,
            "back": None,
            "choices": [{"link": link({names["year"]: y}), "title": str(y)} for y in self.job_years()],
        }

    def job_years(self):
        """Return the years (in the site's zone) that hold jobs of this list.

        A list of at most ``CappedCountPaginator.cap`` rows (already counted)
        asks for its distinct years; a bigger one gets the span from its
        oldest job to its latest execute_at, from indexed reads only (the
        primary key, the pending jobs' time index), never a scan of the table.
        """
        if not getattr(self.paginator, "capped", False):
            # A stored time no year holds (text in SQLite, year 10000 in the site's
            # zone) leaves no year out for the others: no drill-down then.
            try:
                with transaction.atomic(using=self.queryset.db):
                    dates = list(self.queryset.order_by().datetimes(self.date_hierarchy, "year"))
                return sorted({d.year for d in dates if d is not None})
            except (DatabaseError, ValueError, OverflowError, TypeError):
                return []
        jobs = self.root_queryset.order_by()
        first = jobs.order_by("pk").values_list("created_at", "execute_at").first()
        last = jobs.order_by("-pk").values_list("execute_at", flat=True).first()
        pending = jobs.filter(status="pending").order_by("-execute_at").values_list("execute_at", flat=True).first()
        starts = [t for t in (first or ()) if t is not None]
        ends = [t for t in (last, pending) if t is not None]
        if not starts or not ends:
            return []
        low, high = (in_zone(min(starts)).year, in_zone(max(ends)).year)
        return list(range(low, min(high, low + 50) + 1))


def site_view(model_admin, view):
    """Return ``view`` behind the admin site's login and staff checks, as ``ModelAdmin.get_urls`` wraps its own."""

    def wrapper(*args, **kwargs):
        return model_admin.admin_site.admin_view(view)(*args, **kwargs)

    wrapper.model_admin = model_admin
    return update_wrapper(wrapper, view)
