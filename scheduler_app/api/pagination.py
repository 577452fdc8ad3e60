"""Page-number pagination that never counts a whole table.

DRF's PageNumberPagination runs ``COUNT(*)`` over the full filtered set on
every page, which at millions of rows costs more than the page itself. This
paginator:

- fetches ``page_size + 1`` rows to learn whether a next page exists;
- when the page is the last one, knows the exact count for free
  (``offset + rows``);
- otherwise counts at most ``count_limit + 1`` matching rows
  (``SELECT COUNT(*) FROM (... LIMIT n)``), exact up to the limit;
- past the limit sets ``count_exact`` to false and reports the query
  planner's estimate on PostgreSQL (never below ``count_limit + 1``), or
  ``count_limit + 1`` ("more than count_limit") elsewhere.
"""

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from .. import sql

# Offsets past this are refused (404) rather than handed to the database,
# whose OFFSET is a 64-bit integer.
MAX_OFFSET = 2**62


class EstimatedCountPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    count_limit = 10_000

    def paginate_queryset(self, queryset, request, view=None):
        """Return one page of ``queryset`` as a list; remember count and links."""
        self.request = request
        page_size = self.get_page_size(request)
        self.number = self._page_number(request)
        offset = (self.number - 1) * page_size
        if offset > MAX_OFFSET:
            raise NotFound(self.invalid_page_message)
        rows = list(queryset[offset : offset + page_size + 1])
        if not rows and self.number > 1:
            raise NotFound(self.invalid_page_message)
        self.has_next = len(rows) > page_size
        rows = rows[:page_size]
        if self.has_next:
            self.count, self.count_exact = self._bounded_count(queryset)
        else:
            self.count, self.count_exact = offset + len(rows), True
        return rows

    def get_page_size(self, request):
        """Return the requested page size; 400 when it is not 1..max_page_size."""
        raw = request.query_params.get(self.page_size_query_param)
        if not raw:  # absent or empty: not given
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: [f"Must be a whole number from 1 to {self.max_page_size}."]}
            )
        return size

    def _page_number(self, request):
        raw = request.query_params.get(self.page_query_param) or "1"
        try:
            number = int(raw)
        except ValueError:
            raise NotFound(self.invalid_page_message) from None
        if number < 1:
            raise NotFound(self.invalid_page_message)
        return number

    def _bounded_count(self, queryset):
        """Return ``(count, exact)`` without counting past ``count_limit + 1`` rows."""
        counted = queryset.order_by().values("pk")[: self.count_limit + 1].count()
        if counted <= self.count_limit:
            return counted, True
        return max(sql.estimated_rows(queryset) or 0, counted), False

    def get_next_link(self):
        if not self.has_next:
            return None
        return self._link(self.number + 1)

    def get_previous_link(self):
        if self.number <= 1:
            return None
        return self._link(self.number - 1)

    def _link(self, number):
        url = self.request.build_absolute_uri()
        if number == 1:
            return remove_query_param(url, self.page_query_param)
        return replace_query_param(url, self.page_query_param, number)

    def get_html_context(self):
        return {"previous_url": self.get_previous_link(), "next_url": self.get_next_link(), "page_links": []}

    def get_paginated_response(self, data):
        return Response(
            {
                "count": self.count,
                "count_exact": self.count_exact,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema):
        base = super().get_paginated_response_schema(schema)
        base["required"] = ["count", "count_exact", "next", "previous", "results"]
        base["properties"]["count"]["description"] = (
            f"Exact up to {self.count_limit}; past it an estimate (see count_exact)."
        )
        base["properties"] = {
            "count": base["properties"]["count"],
            "count_exact": {
                "type": "boolean",
                "description": f"False when more than {self.count_limit} rows match and count is an estimate.",
            },
            **{k: v for k, v in base["properties"].items() if k != "count"},
        }
        return base

    def get_schema_operation_parameters(self, view):
        return [
            {
                "name": self.page_query_param,
                "required": False,
                "in": "query",
                "description": "A page number within the paginated result set (1-based).",
                "schema": {"type": "integer", "minimum": 1},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Results per page (default {self.page_size}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
        ]
