"""What every model admin of the app shares: the lookup guard, and a bound on each statement of its pages.

``SchedulerModelAdmin`` is the base of every ModelAdmin the app registers
(a house test holds them to it):

- its change list refuses lookups no query can answer (``lookups``:
  Django's "?e=1" answer, never a 500);
- each of its views (the change list, the pages, the JSON feeds, the
  actions' views, the ones ``get_urls`` adds) runs its statements under
  ``SCHEDULER["REQUEST_STATEMENT_TIMEOUT"]`` (``sql.timeouts``); a statement
  cancelled by it answers 503, a page that says so (JSON for a feed).
"""

from functools import update_wrapper

from django.contrib import admin
from django.db import DatabaseError, router
from django.http import JsonResponse
from django.template.response import SimpleTemplateResponse, TemplateResponse
from django.urls import URLPattern

from .. import conf
from ..sql.timeouts import bounded_statements, is_timeout
from .lookups import SafeLookupsMixin

TIMED_OUT = (
    "The database took longer than {seconds:g} s to answer this page, and the statement was cancelled "
    "(SCHEDULER['REQUEST_STATEMENT_TIMEOUT']). Narrow the list with a filter, or try again later."
)


class SchedulerModelAdmin(SafeLookupsMixin, admin.ModelAdmin):
    @property
    def urls(self):
        return [self._bounded(p) if isinstance(p, URLPattern) else p for p in self.get_urls()]

    def _bounded(self, pattern):
        view = pattern.callback

        def bounded(request, *args, **kwargs):
            seconds = conf.get("REQUEST_STATEMENT_TIMEOUT")
            try:
                with bounded_statements(seconds, router.db_for_read(self.model)):
                    response = view(request, *args, **kwargs)
                    if isinstance(response, SimpleTemplateResponse):
                        response.render()  # the list's and the page's queries run here, inside the bound
                    return response
            except DatabaseError as exc:
                if not is_timeout(exc):
                    raise
                return self.timed_out(request, seconds)

        return URLPattern(pattern.pattern, update_wrapper(bounded, view), pattern.default_args, pattern.name)

    def timed_out(self, request, seconds):
        """Return the 503 of a page whose statement the bound cancelled (no query: its transaction may be broken)."""
        message = TIMED_OUT.format(seconds=seconds)
        if "application/json" in request.headers.get("Accept", ""):
            return JsonResponse({"detail": message}, status=503)
        context = {
            "title": "The database took too long",
            "message": message,
            "site_header": self.admin_site.site_header,
            "site_title": self.admin_site.site_title,
            "is_nav_sidebar_enabled": False,
            "has_permission": True,
            "opts": self.opts,
        }
        return TemplateResponse(request, "admin/scheduler_app/timeout.html", context, status=503)


class ReadOnlyModelAdmin(SchedulerModelAdmin):
    """The admin of rows only the scheduler writes: nobody adds, changes or deletes them here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
