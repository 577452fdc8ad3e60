"""Finding jobs by text (``?search=``) and by tag (``?tag=``): each database its own way.

PostgreSQL reads indexes, made by migration 0011 through :func:`add_indexes`:

- ``?search=``: a side table, ``scheduler_app_job_search`` (``job_id``,
  ``document``: ``UPPER(task || ' ' || COALESCE(unique_key, '') || ' ' ||
  args::text || ' ' || kwargs::text || ' ' || meta::text)``), filled by a
  statement-level trigger on every INSERT into the job table (what it
  indexes never changes after that) and emptied by triggers on DELETE and
  TRUNCATE, with a GIN trigram index (``pg_trgm``) on ``document``. Not an
  index on the job table itself: every claim and finish is an UPDATE that
  is not HOT (``status`` is indexed), and a trigram index there made each
  one insert ~100 trigram entries (100,000 updates: 24 s without it, 66 s
  with it, on the shared test machine). :func:`search_matches` is
  ``id IN (SELECT job_id ... WHERE document LIKE UPPER('%text%'))``; the
  index serves text of three characters or more.
- ``?tag=``: a GIN index on ``tags`` (``jsonb_ops``), read by
  ``tags ?| ARRAY[...]`` (any of the tags).

SQLite scans: the same text with ``LIKE`` (case-insensitive for ASCII
only), and ``json_each`` over each row's tags. Django writes JSON on SQLite
with ``\\uXXXX`` escapes for non-ASCII characters, so the escaped form of
the text is searched too.
"""

import json
import re

from django.db.models import BooleanField, F, Func, Q, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Upper
from django.db.models.lookups import Contains

from .base import TABLE, is_postgres
from .indexes import TAGGED

SEARCH_TABLE = "scheduler_app_job_search"
SEARCH_INDEX = "job_search_trgm_idx"
TAGS_INDEX = "job_tags_gin_idx"
# The text ?search= looks in ({} are the columns).
_DOCUMENT = {
    "postgresql": "UPPER({} || ' ' || COALESCE({}, '') || ' ' || {}::text || ' ' || {}::text || ' ' || {}::text)",
    "sqlite": "UPPER({} || ' ' || COALESCE({}, '') || ' ' || {} || ' ' || {} || ' ' || {})",
}
_COLUMNS = ("task", "unique_key", "args", "kwargs", "meta")


class Document(Func):
    """SQLite: a job's task, unique_key, args, kwargs and meta (JSON text) in one upper-case text."""

    output_field = TextField()

    def __init__(self):
        super().__init__(*(F(name) for name in _COLUMNS))

    def as_sql(self, compiler, connection, **extra_context):
        parts, params = [], []
        for expression in self.source_expressions:
            sql, part_params = compiler.compile(expression)
            parts.append(sql)
            params.extend(part_params)
        return _DOCUMENT["sqlite"].format(*parts), params


def _like(value):
    """Return ``%value%`` for LIKE, its wildcards escaped (backslash: the default escape of both databases)."""
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def search_matches(value, using="default", hidden=(), job_id=None):
    """Return a condition: the job's task, unique_key, args, kwargs or meta contain ``value``
    (any case), or it carries the tag ``value``, or it failed with ``value`` in its errors.

    The one rule of finding a job by text: the API's ``?search=`` and the
    admin's search box (``api.filters.search``). Errors (messages and
    tracebacks) change while a job runs, so the search table, written once
    per job, does not hold them: they are read from the failed jobs' rows.
    ``hidden``: names of keyword arguments (lower case, ``FILTER_ARGUMENTS``)
    whose values must not be found: a job where ``value`` is part of one is
    not a match. ``job_id``: the job with this id matches too.

    On PostgreSQL the id is matched inside the first arm, on the side table
    (every job has its row there; the trigram index and the side table's
    primary key make a BitmapOr), not by an ``OR id = N`` beside the
    subquery: that cannot be a semi-join, and the planner runs the subquery
    once per row of the job table (docs/SCALING.md has the figures).
    """
    if is_postgres(using):
        # One id list, each arm through its own index (the trigram index, the
        # tags' GIN index, job_status_id_idx): an OR of conditions on the job
        # table would scan it.
        by_id = " OR job_id = %s" if job_id is not None else ""
        found = RawSQL(
            f"SELECT job_id FROM {SEARCH_TABLE} WHERE document LIKE UPPER(%s){by_id} "
            f"UNION SELECT id FROM {TABLE} WHERE tags ? %s AND {TAGGED} "
            f"UNION SELECT id FROM {TABLE} WHERE status = 'failed' AND UPPER(errors::text) LIKE UPPER(%s)",
            [_like(value), *([job_id] if by_id else []), value, _like(value)],
        )
        return _visible(Q(pk__in=found), value, hidden, using, job_id)
    escaped = json.dumps(value)[1:-1]  # SQLite's JSON text escapes non-ASCII: that form too
    failed = Q(status="failed", errors__icontains=value)
    if escaped != value:
        failed |= Q(status="failed", errors__icontains=escaped)
    document = Q(Contains(Document(), Upper(Value(value))))
    if escaped != value:
        document |= Q(Contains(Document(), Upper(Value(escaped))))
    match = document | failed | tagged([value], using)
    if job_id is not None:
        match |= Q(pk=job_id)
    return _visible(match, value, hidden, using, job_id)


def _visible(match, value, hidden, using, job_id=None):
    """``match``, less the jobs where ``value`` is found only inside a hidden argument's value (not the id's job)."""
    if not hidden:
        return match
    concealed = in_hidden_values(value, hidden, using)
    if job_id is not None:
        concealed &= ~Q(pk=job_id)
    return match & ~concealed


# A value of a key named in a list, at any depth of a job's args or kwargs, holds the text.
_HIDDEN = {
    "postgresql": (
        "EXISTS (SELECT 1 FROM jsonb_path_query(jsonb_build_array({table}.args, {table}.kwargs), "
        "'lax $.** ? (@.type() == \"object\").keyvalue()') AS kv "
        "WHERE lower(kv->>'key') = ANY(%s) AND UPPER((kv->'value')::text) LIKE UPPER(%s))"
    ),
    "sqlite": (
        "EXISTS (SELECT 1 FROM json_tree(CASE WHEN json_valid({table}.args) AND json_valid({table}.kwargs) "
        "THEN json_array(json({table}.args), json({table}.kwargs)) ELSE '[]' END) AS kv "
        "WHERE kv.key IS NOT NULL AND lower(kv.key) IN ({names}) AND UPPER(kv.value) LIKE UPPER(%s) ESCAPE '\\')"
    ),
}


# PostgreSQL: the row's JSON text first. A text value under a hidden key is
# found by one regular expression on it; the walk of the JSON runs only on
# rows with a hidden key whose value is not a text (a number, an object, a
# list) and whose args or kwargs hold the text: the walk is the costly part,
# and most rows never need it (docs/BENCHMARKS.md has the figures).
_ROW_TEXT = "({table}.args::text || ' ' || {table}.kwargs::text)"
_PRECHECKED = "({text} ~* %s OR ({text} ~* %s AND UPPER({text}) LIKE UPPER(%s) AND {walk}))"
_PLAIN_NAME = re.compile(r"[\w.-]+")


def in_hidden_values(value, names, using="default"):
    """Return a condition: ``value`` is part of the value of a key in ``names`` (lower case) in args or kwargs."""
    names = sorted(names)
    if is_postgres(using):
        sql, params = _HIDDEN["postgresql"].format(table=TABLE), [names, _like(value)]
        if all(_PLAIN_NAME.fullmatch(name) for name in names):  # as jsonb prints them: "name": (no escapes)
            keys = '"(' + "|".join(re.escape(name) for name in names) + ')": '
            printed = json.dumps(value, ensure_ascii=False)[1:-1]  # the value as jsonb prints it inside a text
            in_text = keys + '"(\\\\.|[^"\\\\])*' + re.escape(printed)
            sql = _PRECHECKED.format(text=_ROW_TEXT.format(table=TABLE), walk=sql)
            params = [in_text, keys + '[^"]', _like(value), *params]
        return Q(RawSQL(sql, params, output_field=BooleanField()))
    marks = ", ".join(["%s"] * len(names))
    sql, params = _HIDDEN["sqlite"].format(table=TABLE, names=marks), [*names, _like(value)]
    return Q(RawSQL(sql, params, output_field=BooleanField()))


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
        # ``~Q(tags=[])`` is job_tags_gin_idx's predicate (sql.indexes.TAGGED):
        # the planner uses a partial index only for a query that states it.
        return Q(tags__has_any_keys=list(tags)) & ~Q(tags=[])
    return Q(_AnyTagSQLite(F("tags"), tags))


_SEARCH_DDL = """
CREATE TABLE IF NOT EXISTS {table} (job_id bigint PRIMARY KEY, document text NOT NULL)

INSERT INTO {table} (job_id, document) SELECT id, {document} FROM {jobs} ON CONFLICT DO NOTHING

CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin (document gin_trgm_ops)

CREATE OR REPLACE FUNCTION {table}_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {table} (job_id, document) SELECT id, {document} FROM new_jobs;
    RETURN NULL;
END $$

CREATE OR REPLACE FUNCTION {table}_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {table} WHERE job_id IN (SELECT id FROM old_jobs);
    RETURN NULL;
END $$

CREATE OR REPLACE FUNCTION {table}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE {table};
    RETURN NULL;
END $$

CREATE TRIGGER {table}_insert AFTER INSERT ON {jobs} REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {table}_insert()

CREATE TRIGGER {table}_delete AFTER DELETE ON {jobs} REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {table}_delete()

CREATE TRIGGER {table}_truncate AFTER TRUNCATE ON {jobs} FOR EACH STATEMENT EXECUTE FUNCTION {table}_truncate()

CREATE INDEX IF NOT EXISTS {tags_index} ON {jobs} USING gin (tags)
"""

_SEARCH_DROP = """
DROP TRIGGER IF EXISTS {table}_insert ON {jobs}

DROP TRIGGER IF EXISTS {table}_delete ON {jobs}

DROP TRIGGER IF EXISTS {table}_truncate ON {jobs}

DROP FUNCTION IF EXISTS {table}_insert()

DROP FUNCTION IF EXISTS {table}_delete()

DROP FUNCTION IF EXISTS {table}_truncate()

DROP TABLE IF EXISTS {table}

DROP INDEX IF EXISTS {tags_index}
"""


def _ddl(template):
    """Return the statements of ``template`` (separated by blank lines), filled in."""
    text = template.format(
        table=SEARCH_TABLE,
        jobs=TABLE,
        index=SEARCH_INDEX,
        tags_index=TAGS_INDEX,
        document=_DOCUMENT["postgresql"].format(*_COLUMNS),
    )
    return [statement.strip() for statement in text.split("\n\n") if statement.strip()]


def add_indexes(schema_editor):
    """Create the search table, its triggers and index, and the tags index (PostgreSQL; SQLite scans)."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for statement in _ddl(_SEARCH_DDL):
            schema_editor.execute(statement)


def remove_indexes(schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in _ddl(_SEARCH_DROP):
            schema_editor.execute(statement)
