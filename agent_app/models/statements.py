"""Single SQL statements for the writes every run and every reply makes, and the reads
every run makes (``get_joined``, ``pk_exists``, or a row another statement returns:
``returned_columns`` and ``instance_from``).

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
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import models
from django.utils import timezone

from agent_app.models.instances import loaded, new
from agent_app.process.connection import default_connection

__all__ = [
    "execute",
    "get_joined",
    "insert",
    "instance_from",
    "moment_param",
    "new",
    "pk_exists",
    "returned_columns",
    "run",
    "update",
    "uuid_param",
]


def execute(cursor: Any, sql: str, params: Sequence[Any]) -> None:
    """``cursor.execute(sql, params)`` for a statement written once (``%s`` placeholders).

    On SQLite it is sent with named placeholders instead (``%(p0)s``, a dict of parameters):
    Django's SQLite cursor turns those into SQLite's with one ``%`` formatting, where
    positional ones take a regular expression over the whole statement (about 60,000
    instructions for a run's longer statements; 9% of the ORM thread's work in a run).
    """
    if cursor.db.vendor == "sqlite" and (named := _named(sql)) is not None:
        text, names, _ = named
        cursor.execute(text, dict(zip(names, params, strict=True)))
    else:
        cursor.execute(sql, params)


#: What ``run`` reads of a statement's cursor.
ROWCOUNT, ONE, ALL = "rowcount", "one", "all"


def run(db: Any, sql: str, params: Sequence[Any], want: str = ROWCOUNT) -> Any:
    """Send a statement written once (``%s`` placeholders) on ``db``; its ``rowcount``, its
    first row (``ONE``) or its rows (``ALL``).

    On SQLite, once connected and with nothing watching the queries (no debug cursor, no
    ``execute_wrapper``), the statement goes straight to the driver's connection with
    SQLite's own placeholders (made once per statement), inside Django's error wrapper and
    its broken-transaction check: the layers of Django's cursor (a wrapper object per
    statement, its thread and event-loop checks, the placeholders' conversion) were about
    a quarter of the ORM thread's work in a run. Anything else takes Django's cursor.
    """
    if (
        db.vendor == "sqlite"
        and db.connection is not None
        and not db.execute_wrappers
        and not db.queries_logged
        and (named := _named(sql)) is not None
    ):
        db.validate_no_broken_transaction()
        with db.wrap_database_errors:
            return _read(_send(db.connection, named[2], params), want)
    with db.cursor() as cursor:
        execute(cursor, sql, params)
        return _read(cursor, want)


def _send(connection: Any, sql: str, params: Sequence[Any]) -> Any:
    """The driver's ``execute``: SQLite's statement (``?`` placeholders), its cursor."""
    return connection.execute(sql, params)


def _read(cursor: Any, want: str) -> Any:
    if want == ONE:
        return cursor.fetchone()
    if want == ALL:
        return cursor.fetchall()
    return cursor.rowcount


@functools.lru_cache(maxsize=512)
def _named(sql: str) -> tuple[str, tuple[str, ...], str] | None:
    """``sql`` with named placeholders and their names, in order, and as SQLite takes it
    (``?`` placeholders, ``%%`` as ``%``); None when the statement would not survive ``%``
    formatting (a lone ``%``): it is sent as it is."""
    names: list[str] = []

    def name(_: re.Match[str]) -> str:
        names.append(f"p{len(names)}")
        return f"%({names[-1]})s"

    text = _PLACEHOLDER.sub(name, sql)
    try:
        native = text % dict.fromkeys(names, "?")
    except (ValueError, TypeError, KeyError):
        return None
    return text, tuple(names), native


#: A "format" placeholder, as Django's SQLite backend finds them.
_PLACEHOLDER = re.compile(r"(?<!%)%s")


def insert(rows: list[Any], *, returning_pk: bool = False) -> None:
    """INSERT new instances of one model in one statement.

    With ``returning_pk`` the database's ids are set on the instances (``RETURNING``, as
    ``bulk_create`` does on PostgreSQL and SQLite); otherwise their ``pk`` stays unset.
    """
    if not rows:
        return
    db = default_connection()
    model = type(rows[0])
    sql, converters = _insert_sql(model, len(rows), returning_pk, db.vendor)
    params = [convert(row, db) for row in rows for convert in converters]
    if not returning_pk:
        run(db, sql, params)
        return
    for row, (pk,) in zip(rows, run(db, sql, params, ALL), strict=True):
        row.pk = pk


@functools.lru_cache(maxsize=256)
def _insert_sql(
    model: type[models.Model], count: int, returning_pk: bool, vendor: str
) -> tuple[str, tuple[Callable[[Any, Any], Any], ...]]:
    """The statement of ``insert`` for ``count`` rows of ``model`` on one backend, and the
    converters of the fields whose values it takes, in order (built once per shape)."""
    db = default_connection()
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
    return sql, tuple(_converter(field) for field in fields)


def _converter(field: models.Field) -> Callable[[Any, Any], Any]:
    """``(row, db)`` → the value ``insert`` sends for ``field``: the same as
    ``field.get_db_prep_save(field.pre_save(row, True), db)``.

    Django's own text, boolean and integer fields leave a value of their type as it is
    (an integer goes through the backend's ``adapt_integerfield_value``, as the field
    does); for those the chain of conversions is skipped. Any other field, or a value of
    another type, takes the field's own path.
    """
    cls, base = type(field), models.Field
    attname = field.attname

    def full(row: Any, db: Any) -> Any:
        return field.get_db_prep_save(field.pre_save(row, True), db)

    special = _special_converter(field, full)
    if special is not None:
        return special
    if cls.pre_save is not base.pre_save or cls.get_db_prep_save is not base.get_db_prep_save:
        return full
    prep, to_python = cls.get_prep_value, cls.to_python
    if cls.get_db_prep_value is base.get_db_prep_value and (prep, to_python) in _TEXT_METHODS:

        def text(row: Any, db: Any) -> Any:
            value = row.__dict__.get(attname, _UNSET)  # unset: not text, the full path
            return value if value is None or isinstance(value, str) else full(row, db)

        return text
    if cls.get_db_prep_value is base.get_db_prep_value and (prep, to_python) == _BOOL_METHODS:

        def boolean(row: Any, db: Any) -> Any:
            value = row.__dict__.get(attname, _UNSET)  # unset: the full path
            return value if value is None or type(value) is bool else full(row, db)

        return boolean
    if (cls.get_db_prep_value, prep) == _INT_METHODS:
        internal_type = field.get_internal_type()

        def integer(row: Any, db: Any) -> Any:
            value = row.__dict__.get(attname, _UNSET)  # unset: the full path
            if value is None or type(value) is int:
                return db.ops.adapt_integerfield_value(value, internal_type)
            return full(row, db)

        return integer
    return full


def _special_converter(
    field: models.Field, full: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any] | None:
    """``_converter``'s fast paths for Django's own JSON and date-time fields and for a
    foreign key to a UUID: the backend's own adaptation of the value, without the layers
    of methods in between (a run's rows have four JSON fields and a date each), and the
    key's parameter cached (``uuid_param``). None for any other field."""
    cls, attname = type(field), field.attname
    if cls is models.JSONField:
        encoder = field.encoder

        def json_value(row: Any, db: Any) -> Any:
            value = row.__dict__.get(attname, _UNSET)  # unset: the full path
            if value is None:
                return None
            if type(value) in _JSON_TYPES:
                return db.ops.adapt_json_value(value, encoder)
            return full(row, db)

        return json_value
    if cls is models.DateTimeField:
        auto = field.auto_now or field.auto_now_add

        def moment(row: Any, db: Any) -> Any:
            if auto:  # ``pre_save`` sets the row's value: an aware time with ``USE_TZ``
                value = timezone.now()
                setattr(row, attname, value)
                return moment_param(value, db)
            value = row.__dict__.get(attname, _UNSET)
            if type(value) is datetime and value.utcoffset() is not None:
                return moment_param(value, db)
            return full(row, db)

        return moment
    if (
        cls is models.ForeignKey
        and type(field.target_field) is models.UUIDField
        and not field.target_field.empty_strings_allowed
    ):

        def key(row: Any, db: Any) -> Any:
            value = row.__dict__.get(attname, _UNSET)
            if type(value) is str and value:  # "" is NULL: the full path
                return uuid_param(value, db)
            return full(row, db)

        return key
    return None


def moment_param(value: datetime, db: Any) -> Any:
    """``db.ops.adapt_datetimefield_value(value)`` for an aware ``datetime``.

    On SQLite, with the connection's time zone UTC (``USE_TZ`` and no database
    ``TIME_ZONE``), a time in UTC is sent as its text without the offset: what Django's
    ``make_naive`` and ``str`` make of it, without their calls (about 4 µs a value, seven
    values a run)."""
    if value.tzinfo is _UTC and db.vendor == "sqlite" and db.timezone is _UTC:
        return str(value)[:-6]  # "+00:00"
    return db.ops.adapt_datetimefield_value(value)


_UTC = UTC

#: Values a JSON field adapts as they are (``get_prep_value`` only casts lazy text).
_JSON_TYPES = frozenset({dict, list, str, int, float, bool})


def uuid_param(value: Any, db: Any) -> Any:
    """``value`` (a UUID or its text) as a ``UUIDField`` sends it to ``db`` (``ValueError``
    for text that is no UUID); cached by value: a run sends its chat's key several times."""
    return _uuid_param(str(value), db.features.has_native_uuid_field)


@functools.lru_cache(maxsize=1024)
def _uuid_param(text: str, native: bool) -> Any:
    key = uuid.UUID(text)
    return key if native else key.hex


#: What a row's ``__dict__`` holds for a field it does not hold (deferred): no fast path.
_UNSET = object()
_TEXT_METHODS = (
    (models.CharField.get_prep_value, models.CharField.to_python),
    (models.TextField.get_prep_value, models.TextField.to_python),
)
_BOOL_METHODS = (models.BooleanField.get_prep_value, models.BooleanField.to_python)
_INT_METHODS = (models.IntegerField.get_db_prep_value, models.IntegerField.get_prep_value)


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
    db = default_connection()
    sql = _update_sql(model, tuple(values), conditions, db.vendor)
    params = [_save_param(meta.get_field(name), value, db) for name, value in values.items()]
    for name, value in where.items():
        if name.endswith("__in"):
            field = meta.get_field(name[:-4])
            params += [field.get_db_prep_value(item, db) for item in value]
        else:
            params.append(meta.get_field(name).get_db_prep_value(value, db))
    return run(db, sql, params)


def _save_param(field: models.Field, value: Any, db: Any) -> Any:
    """``field.get_db_prep_save(value, db)``; an aware time for a ``DateTimeField`` as
    ``moment_param`` sends it."""
    if (
        type(field) is models.DateTimeField
        and type(value) is datetime
        and value.utcoffset() is not None
    ):
        return moment_param(value, db)
    return field.get_db_prep_save(value, db)


@functools.cache
def _update_sql(
    model: type[models.Model],
    names: tuple[str, ...],
    conditions: tuple[tuple[str, int | None], ...],
    vendor: str,
) -> str:
    """The statement of ``update`` for one shape of call on one backend (built once)."""
    meta = model._meta
    quote = default_connection().ops.quote_name

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


def get_joined(model: type[models.Model], relation: str, pk: Any, *, by: str = "pk") -> Any:
    """``model.objects.select_related(relation).get(pk=pk)`` in one statement built once;
    ``by``: another unique field to look the row up by (``pk`` is then its value).

    ``relation``: a forward foreign key of ``model``; its row comes with the same query
    (``None`` cached when the key is empty). ``model.DoesNotExist`` when there is no row.
    The default manager's queryset is not consulted: only for models whose manager
    filters nothing.
    """
    db = default_connection()
    shape = _joined_shape(model, relation, by, db.vendor)
    if shape is None:
        return model._default_manager.select_related(relation).get(**{by: pk})
    row = run(db, shape.sql, [shape.key.get_db_prep_value(pk, db)], ONE)
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
    #: The field the row is looked up by.
    key: Any
    names: list[str]
    related_names: list[str]
    #: The related model's primary key among its columns.
    related_pk: int
    #: ``(column, its converters, its expression)``, as the ORM's compiler applies them.
    converters: list[tuple[int, list[Any], Any]]


@functools.cache
def _joined_shape(model: type[models.Model], relation: str, by: str, vendor: str) -> _Joined | None:
    """The statement of ``get_joined`` for one model and relation on one backend; None
    for a shape it does not write out (a table joined to itself, a model whose fields
    live in more than one table): the ORM reads those."""
    db = default_connection()
    quote = db.ops.quote_name
    meta, field = model._meta, model._meta.get_field(relation)
    related = field.related_model._meta
    table, joined = meta.db_table, related.db_table
    key = meta.pk if by == "pk" else meta.get_field(by)
    if table == joined or meta.parents or related.parents or not key.unique:
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
        + f" WHERE {quote(table)}.{quote(key.column)} = %s"
    )
    converters = _converters(columns, db)
    return _Joined(
        sql,
        field,
        key,
        [field_.attname for field_ in fields],
        [field_.attname for field_ in related_fields],
        related_fields.index(related.pk),
        converters,
    )


def _converters(columns: list[Any], db: Any) -> list[tuple[int, list[Any], Any]]:
    """``(index, converters, column)`` for each column that has converters, as the ORM's
    compiler applies them to a row it read."""
    converters = []
    for index, col in enumerate(columns):
        found = db.ops.get_db_converters(col) + col.get_db_converters(db)
        if found:
            converters.append((index, found, col))
    return converters


def pk_exists(manager: models.Manager, pk: Any) -> bool:
    """``manager.filter(pk=pk).exists()`` in one statement built once; through the ORM
    when the manager's queryset is its own (it may filter rows out)."""
    model = manager.model
    if type(manager).get_queryset is not models.Manager.get_queryset:
        return manager.filter(pk=pk).exists()
    db = default_connection()
    params = [model._meta.pk.get_db_prep_value(pk, db)]
    return run(db, _exists_sql(model, db.vendor), params, ONE) is not None


@functools.cache
def _exists_sql(model: type[models.Model], vendor: str) -> str:
    quote = default_connection().ops.quote_name
    meta = model._meta
    return f"SELECT 1 FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} = %s LIMIT 1"


@dataclass(frozen=True)
class Returned:
    """Every column of one model's row, as a statement lists them (``RETURNING`` …)."""

    sql: str
    names: list[str]
    #: ``(column, its converters, its expression)``, as the ORM's compiler applies them.
    converters: list[tuple[int, list[Any], Any]]


@functools.cache
def returned_columns(model: type[models.Model], vendor: str) -> Returned:
    """The columns of ``model``'s row for a statement that returns it (such as an
    ``UPDATE … RETURNING`` that also locks it), in ``instance_from``'s order."""
    db = default_connection()
    quote = db.ops.quote_name
    fields = list(model._meta.concrete_fields)
    columns = [field.get_col(model._meta.db_table) for field in fields]
    converters = _converters(columns, db)
    return Returned(
        ", ".join(quote(col.target.column) for col in columns),
        [field.attname for field in fields],
        converters,
    )


def instance_from(model: type[models.Model], values: Sequence[Any]) -> Any:
    """The ``model`` instance of a row a statement returned (``returned_columns``' order),
    through the same converters as the ORM's reads."""
    db = default_connection()
    shape = returned_columns(model, db.vendor)
    values = list(values)
    for index, converters, expression in shape.converters:
        for converter in converters:
            values[index] = converter(values[index], expression, db)
    return loaded(model, db.alias, values)
