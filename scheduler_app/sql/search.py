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
  ``id IN (SELECT job_id ... WHERE document LIKE UPPER('%text%'))`` (with
  ``OR job_id = N`` for a number, the id); the index serves text of
  three characters or more, shorter text scans the side table.
- ``?tag=``: a GIN index on ``tags`` (``jsonb_ops``), read by
  ``tags ?| ARRAY[...]`` (any of the tags).

SQLite scans: the same text with ``LIKE`` (case-insensitive for ASCII
only), and ``json_each`` over each row's tags. Django writes JSON on SQLite
with ``\\uXXXX`` escapes for non-ASCII characters, so the escaped form of
the text is searched too.
"""

import json

from django.db.models import BooleanField, F, Func, Q, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Upper
from django.db.models.lookups import Contains

from .base import TABLE, is_postgres

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


def search_matches(value, using="default", job_id=None):
    """Return a condition: the job's task, unique_key, args, kwargs or meta contain ``value`` (any case),
    or, when ``job_id`` is given, the job's id is ``job_id``.

    On PostgreSQL the id is matched inside the subquery, on the side table
    (every job has its row there; its primary key and the trigram index
    together are a BitmapOr), not by an ``OR`` beside it: ``id IN (...) OR
    id = N`` cannot be a semi-join, and the planner ran the subquery once
    per row of the table (300,000 jobs: no answer in minutes; docs/SCALING.md
    has the figures). Nor by ``UNION ALL SELECT N``: the planner then guesses
    200 matches and joins half a million by index lookups (4 s).
    """
    if is_postgres(using):
        found = f"SELECT job_id FROM {SEARCH_TABLE} WHERE document LIKE UPPER(%s)"
        params = [_like(value)]
        if job_id is not None:
            found += " OR job_id = %s"
            params.append(job_id)
        return Q(pk__in=RawSQL(found, params))
    match = Q(Contains(Document(), Upper(Value(value))))
    escaped = json.dumps(value)[1:-1]
    if escaped != value:
        match |= Q(Contains(Document(), Upper(Value(escaped))))
    if job_id is not None:
        match |= Q(pk=job_id)
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
