"""Single SQL statements for the writes every run and every reply makes.

The ORM builds and compiles a query object for each ``create`` or ``update``; for the rows a
run writes per message and a reply writes before it may act, that costs several times the
statement itself (a reply's audit row: ~0.45 ms against ~0.34 ms; a wait's status change
~0.8 ms against ~0.33 ms of CPU on PostgreSQL). These helpers write the same columns the
ORM would — each value goes through its field's ``pre_save`` and ``get_db_prep_save`` /
``get_db_prep_value`` — as one parameterized statement, and nothing else: no signals, no
validation, the same as ``bulk_create`` and ``QuerySet.update``.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

__all__ = ["insert", "update"]


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
