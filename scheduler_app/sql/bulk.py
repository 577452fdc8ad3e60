"""PostgreSQL: insert many rows of a model as one JSON document.

``bulk_create`` on PostgreSQL prepares every field of every row in Python
(``get_db_prep_save``, a call per field of each job) and hands psycopg one
array per column, which it quotes element by element: most of
``enqueue_many``'s Python time. Here each row becomes a list
of plain JSON values, the batch one ``json.dumps`` (C), and the server
unpacks it with ``json_to_recordset``: the same INSERT, one parameter.
The single enqueue (``postgres.pg_insert_and_notify``) sends the same
statement with a document of one row: psycopg quotes one string instead
of thirty values.

Only for models whose fields have a JSON form that PostgreSQL's input
functions read back unchanged (text, numbers, booleans, timestamps as ISO
8601, JSON columns without a custom encoder); anything else, and any value
``json.dumps`` refuses, returns None so the caller falls back to
``bulk_create``.
"""

import json

from django.db import connections, models

_SIMPLE = (
    models.CharField,
    models.TextField,
    models.IntegerField,
    models.FloatField,
    models.BooleanField,
    models.ForeignKey,
)


def _columns(model, connection):
    """Return ``[(field, sql type, reader)]`` for the model's inserted columns, or None."""
    meta = model._meta
    columns = []
    for field in meta.local_concrete_fields:
        if field.generated or field is meta.auto_field:
            continue
        if isinstance(field, models.DateTimeField):
            if field.auto_now or field.auto_now_add:
                return None  # pre_save would have to run per row: not worth a special case
            reader = _datetime
        elif isinstance(field, models.JSONField):
            if field.encoder is not None:
                return None
            reader = None
        elif isinstance(field, _SIMPLE):
            reader = None
        else:
            return None
        columns.append((field, field.db_type(connection), reader))
    return columns


def _datetime(value):
    return None if value is None else value.isoformat()


def json_insert(model, using="default"):
    """Return ``(statement, readers)``: the model's INSERT of a JSON document of rows, or None.

    The statement takes one parameter, the document (``rows_document``),
    and returns the new primary keys in the order of its rows. None when a
    field has no faithful JSON form (use the ORM).
    """
    key = (model, using)
    if key not in _STATEMENTS:
        connection = connections[using]
        columns = _columns(model, connection)
        if columns is None:
            _STATEMENTS[key] = None
        else:
            names = ", ".join(connection.ops.quote_name(f.column) for f, _, _ in columns)
            spec = ", ".join(f"c{i} {db_type}" for i, (_, db_type, _) in enumerate(columns))
            picks = ", ".join(f"c{i}" for i in range(len(columns)))
            statement = (
                f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({names}) "
                f"SELECT {picks} FROM json_to_recordset(%s::json) AS r({spec}) "
                f"RETURNING {connection.ops.quote_name(model._meta.pk.column)}"
            )
            readers = [(f"c{i}", f.attname, reader) for i, (f, _, reader) in enumerate(columns)]
            _STATEMENTS[key] = (statement, readers)
    return _STATEMENTS[key]


def rows_document(objs, readers):
    """Return the JSON document of ``objs`` for ``json_insert``'s statement, or None if a value has no JSON form."""
    rows = [
        {
            name: value if reader is None else reader(value)
            for name, attname, reader in readers
            if (value := getattr(obj, attname)) is not None  # an absent key is NULL: a shorter document
        }
        for obj in objs
    ]
    try:
        return json.dumps(rows, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def pg_bulk_insert(objs, *, using="default"):
    """Insert ``objs`` (unsaved instances of one model) and set their primary keys.

    Return True, or None when the model or a value has no faithful JSON
    form (nothing was sent: use ``bulk_create``). Runs in the caller's
    transaction; the ids come back in the order of ``objs``.
    """
    if not objs:
        return True
    prepared = json_insert(type(objs[0]), using)
    if prepared is None:
        return None
    statement, readers = prepared
    document = rows_document(objs, readers)
    if document is None:
        return None
    with connections[using].cursor() as cursor:
        cursor.execute(statement, [document])
        ids = [row[0] for row in cursor.fetchall()]
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = using
    return True


# (model, alias) -> (statement, [(column alias, attname, reader)]) or None (not for this model)
_STATEMENTS = {}
