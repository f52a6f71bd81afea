"""Single SQL statements for the writes every run and every reply makes, and the reads
every run makes (``get_joined``, ``pk_exists``).

The ORM builds and compiles a query object for each ``create`` or ``update``; for the rows a
run writes per message and a reply writes before it may act, that costs several times the
statement itself (a reply's audit row: ~0.45 ms against ~0.34 ms; a wait's status change
~0.8 ms against ~0.33 ms of CPU on PostgreSQL). These helpers write the same columns the
ORM would — each value goes through its field's ``pre_save`` and ``get_db_prep_save`` /
``get_db_prep_value`` — as one parameterized statement, and nothing else: no signals, no
validation, the same as ``bulk_create`` and ``QuerySet.update``. ``get_joined`` reads
one row with a related row as ``select_related`` does, through the same converters; a
test checks every one of them against the ORM form.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

__all__ = ["get_joined", "insert", "pk_exists", "update"]


def insert(rows: list[Any], *, returning_pk: bool = False) -> None:
    """INSERT new instances of one model in one statement.

    With ``returning_pk`` the database's ids are set on the instances (``RETURNING``, as
    ``bulk_create`` does on PostgreSQL and SQLite); otherwise their ``pk`` stays unset.
    """
    if not rows:
        return
    db = connections[DEFAULT_DB_ALIAS]
    model = type(rows[0])
    sql, fields = _insert_sql(model, len(rows), returning_pk, db.vendor)
    params = [
        field.get_db_prep_save(field.pre_save(row, True), db) for row in rows for field in fields
    ]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        if returning_pk:
            for row, (pk,) in zip(rows, cursor.fetchall(), strict=True):
                row.pk = pk


@functools.lru_cache(maxsize=256)
def _insert_sql(
    model: type[models.Model], count: int, returning_pk: bool, vendor: str
) -> tuple[str, list[models.Field]]:
    """The statement of ``insert`` for ``count`` rows of ``model`` on one backend, and the
    fields whose values it takes, in order (built once per shape)."""
    db = connections[DEFAULT_DB_ALIAS]
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    quote = db.ops.quote_name
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ("
        + ", ".join(quote(field.column) for field in fields)
        + ") VALUES "
        + ", ".join([one] * count)
    )
    if returning_pk:
        if not db.features.can_return_rows_from_bulk_insert:
            raise NotImplementedError(f"{vendor} cannot return inserted ids")
        sql += f" RETURNING {quote(meta.pk.column)}"
    return sql, fields


def update(model: type[models.Model], values: dict[str, Any], **where: Any) -> int:
    """UPDATE ``model``'s rows matching ``where``; return how many changed.

    ``values`` maps field names to new values; ``where`` holds ``field=value`` and
    ``field__in=(values…)`` conditions, all of which must hold.
    """
    meta = model._meta
    conditions = tuple(
        (name, len(value) if name.endswith("__in") else None) for name, value in where.items()
    )
    if any(count == 0 for _, count in conditions):
        return 0  # ``IN ()``: no row can match
    db = connections[DEFAULT_DB_ALIAS]
    sql = _update_sql(model, tuple(values), conditions, db.vendor)
    params = [meta.get_field(name).get_db_prep_save(value, db) for name, value in values.items()]
    for name, value in where.items():
        if name.endswith("__in"):
            field = meta.get_field(name[:-4])
            params += [field.get_db_prep_value(item, db) for item in value]
        else:
            params.append(meta.get_field(name).get_db_prep_value(value, db))
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@functools.cache
def _update_sql(
    model: type[models.Model],
    names: tuple[str, ...],
    conditions: tuple[tuple[str, int | None], ...],
    vendor: str,
) -> str:
    """The statement of ``update`` for one shape of call on one backend (built once)."""
    meta = model._meta
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name

    def column(name: str) -> str:
        return quote(meta.get_field(name).column)

    clauses = []
    for name, count in conditions:
        if count is None:
            clauses.append(f"{column(name)} = %s")
        else:
            clauses.append(f"{column(name[:-4])} IN ({', '.join(['%s'] * count)})")
    return (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{column(name)} = %s" for name in names)
        + " WHERE "
        + " AND ".join(clauses)
    )


def get_joined(model: type[models.Model], relation: str, pk: Any) -> Any:
    """``model.objects.select_related(relation).get(pk=pk)`` in one statement built once.

    ``relation``: a forward foreign key of ``model``; its row comes with the same query
    (``None`` cached when the key is empty). ``model.DoesNotExist`` when there is no row.
    The default manager's queryset is not consulted: only for models whose manager
    filters nothing.
    """
    db = connections[DEFAULT_DB_ALIAS]
    shape = _joined_shape(model, relation, db.vendor)
    if shape is None:
        return model._default_manager.select_related(relation).get(pk=pk)
    with db.cursor() as cursor:
        cursor.execute(shape.sql, [model._meta.pk.get_db_prep_value(pk, db)])
        row = cursor.fetchone()
    if row is None:
        raise model.DoesNotExist(f"{model._meta.object_name} matching query does not exist.")
    values = list(row)
    for index, converters, expression in shape.converters:
        for converter in converters:
            values[index] = converter(values[index], expression, db)
    width = len(shape.names)
    found = model.from_db(db.alias, shape.names, values[:width])
    related_values = values[width:]
    related = None
    if related_values[shape.related_pk] is not None:
        related = shape.field.related_model.from_db(db.alias, shape.related_names, related_values)
    shape.field.set_cached_value(found, related)
    if related is not None and shape.field.unique:
        shape.field.remote_field.set_cached_value(related, found)
    return found


@dataclass(frozen=True)
class _Joined:
    sql: str
    field: Any
    names: list[str]
    related_names: list[str]
    #: The related model's primary key among its columns.
    related_pk: int
    #: ``(column, its converters, its expression)``, as the ORM's compiler applies them.
    converters: list[tuple[int, list[Any], Any]]


@functools.cache
def _joined_shape(model: type[models.Model], relation: str, vendor: str) -> _Joined | None:
    """The statement of ``get_joined`` for one model and relation on one backend; None
    for a shape it does not write out (a table joined to itself, a model whose fields
    live in more than one table): the ORM reads those."""
    db = connections[DEFAULT_DB_ALIAS]
    quote = db.ops.quote_name
    meta, field = model._meta, model._meta.get_field(relation)
    related = field.related_model._meta
    table, joined = meta.db_table, related.db_table
    if table == joined or meta.parents or related.parents:
        return None
    fields, related_fields = list(meta.concrete_fields), list(related.concrete_fields)
    columns = [field_.get_col(table) for field_ in fields]
    columns += [field_.get_col(joined) for field_ in related_fields]
    join = "LEFT OUTER JOIN" if field.null else "INNER JOIN"
    sql = (
        "SELECT "
        + ", ".join(f"{quote(col.alias)}.{quote(col.target.column)}" for col in columns)
        + f" FROM {quote(table)} {join} {quote(joined)} ON ("
        + f"{quote(table)}.{quote(field.column)} = "
        + f"{quote(joined)}.{quote(field.target_field.column)})"
        + f" WHERE {quote(table)}.{quote(meta.pk.column)} = %s"
    )
    converters = []
    for index, col in enumerate(columns):
        found = db.ops.get_db_converters(col) + col.get_db_converters(db)
        if found:
            converters.append((index, found, col))
    return _Joined(
        sql,
        field,
        [field_.attname for field_ in fields],
        [field_.attname for field_ in related_fields],
        related_fields.index(related.pk),
        converters,
    )


def pk_exists(manager: models.Manager, pk: Any) -> bool:
    """``manager.filter(pk=pk).exists()`` in one statement built once; through the ORM
    when the manager's queryset is its own (it may filter rows out)."""
    model = manager.model
    if type(manager).get_queryset is not models.Manager.get_queryset:
        return manager.filter(pk=pk).exists()
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(_exists_sql(model, db.vendor), [model._meta.pk.get_db_prep_value(pk, db)])
        return cursor.fetchone() is not None


@functools.cache
def _exists_sql(model: type[models.Model], vendor: str) -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    meta = model._meta
    return f"SELECT 1 FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} = %s LIMIT 1"
