"""Finding jobs by text (``?search=``) and by tag (``?tag=``): each database its own way.

PostgreSQL reads indexes, made by migration 0011 through :func:`add_indexes`:

- ``job_search_trgm_idx``: a GIN trigram index (``pg_trgm``) on
  ``UPPER(task || ' ' || COALESCE(unique_key, '') || ' ' || args::text ||
  ' ' || kwargs::text || ' ' || meta::text)``: :func:`search_matches` is a
  ``LIKE '%TEXT%'`` on that very expression, so the planner uses the index
  (a bitmap scan) for text of three characters or more. ``jsonb``'s text
  keeps non-ASCII characters as they are.
- ``job_tags_gin_idx``: a GIN index on ``tags`` (``jsonb_ops``), read by
  ``tags ?| ARRAY[...]`` (any of the tags).

SQLite scans: the same expression with ``LIKE`` (case-insensitive for ASCII
only), and ``json_each`` over each row's tags. Django writes JSON on SQLite
with ``\\uXXXX`` escapes for non-ASCII characters, so the escaped form of
the text is searched too.
"""

import json

from django.db.models import BooleanField, F, Func, Q, TextField, Value
from django.db.models.functions import Upper
from django.db.models.lookups import Contains

from .base import TABLE, is_postgres

SEARCH_INDEX = "job_search_trgm_idx"
TAGS_INDEX = "job_tags_gin_idx"
# The text ?search= looks in, as each database writes it ({} are the columns, quoted and qualified by Django).
_DOCUMENT = {
    "postgresql": "UPPER({} || ' ' || COALESCE({}, '') || ' ' || {}::text || ' ' || {}::text || ' ' || {}::text)",
    "sqlite": "UPPER({} || ' ' || COALESCE({}, '') || ' ' || {} || ' ' || {} || ' ' || {})",
}
_COLUMNS = ("task", "unique_key", "args", "kwargs", "meta")


class Document(Func):
    """A job's task, unique_key, args, kwargs and meta (JSON text) in one upper-case text."""

    output_field = TextField()

    def __init__(self):
        super().__init__(*(F(name) for name in _COLUMNS))

    def as_sql(self, compiler, connection, **extra_context):
        parts, params = [], []
        for expression in self.source_expressions:
            sql, part_params = compiler.compile(expression)
            parts.append(sql)
            params.extend(part_params)
        template = _DOCUMENT["postgresql" if connection.vendor == "postgresql" else "sqlite"]
        return template.format(*parts), params


def search_matches(value, using="default"):
    """Return a condition: the job's task, unique_key, args, kwargs or meta contain ``value`` (any case)."""
    match = Q(Contains(Document(), Upper(Value(value))))
    if not is_postgres(using):
        escaped = json.dumps(value)[1:-1]
        if escaped != value:
            match |= Q(Contains(Document(), Upper(Value(escaped))))
    return match


class _AnyTagSQLite(Func):
    """``EXISTS (SELECT 1 FROM json_each(tags) WHERE value IN (...))``: a row's tags include one of ``tags``."""

    output_field = BooleanField()

    def __init__(self, column, tags):
        super().__init__(column)
        self.tags = list(tags)

    def as_sql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        marks = ", ".join(["%s"] * len(self.tags))
        sql = f"EXISTS (SELECT 1 FROM json_each({column}) AS tag WHERE tag.value IN ({marks}))"
        return sql, (*params, *self.tags)


def tagged(tags, using="default"):
    """Return a condition: the job carries at least one of ``tags``."""
    if is_postgres(using):
        return Q(tags__has_any_keys=list(tags))
    return Q(_AnyTagSQLite(F("tags"), tags))


def add_indexes(schema_editor):
    """Create the search and tag indexes (PostgreSQL; ``pg_trgm`` must exist). SQLite has none: it scans."""
    if schema_editor.connection.vendor != "postgresql":
        return
    document = _DOCUMENT["postgresql"].format(*_COLUMNS)
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {SEARCH_INDEX} ON {TABLE} USING gin (({document}) gin_trgm_ops)")
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {TAGS_INDEX} ON {TABLE} USING gin (tags)")


def remove_indexes(schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {SEARCH_INDEX}")
    schema_editor.execute(f"DROP INDEX IF EXISTS {TAGS_INDEX}")
