"""Model instances built without ``Model.__init__``'s loop over every field.

``Model.__init__`` stores each field's value with a ``setattr`` and asks every field not
given for its default: for a message row of 22 fields, about 86,000 instructions, most of
the cost of building it. A run builds three rows to write (``new``) and reads its chat's
row back (``loaded``). Here the values go straight into the instance's ``__dict__``, which
is where ``__init__`` leaves them, whenever that is all ``__init__`` would do: nothing
listens to the model's ``pre_init`` or ``post_init``, no field's attribute on the class is
other than Django's deferred ones (a foreign key's id sets only its value on a new
instance), and no field is generated. Otherwise the model's own constructor builds it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

__all__ = ["loaded", "new"]


def new(model: type[models.Model], **values: Any) -> Any:
    """``model(**values)``: ``values`` by field ``attname``, the other fields get their
    defaults (one that is the same value every time, no callable and no database default,
    is read once per model). A message row: 86,000 instructions through ``__init__``'s
    keyword form, 42,000 here."""
    fields = _fields(model)
    if fields is None:
        return model(**values)
    args = [
        values.pop(attname)
        if attname in values
        else (default if default is not _CALLED else field.get_default())
        for attname, field, default in fields
    ]
    if values:
        raise TypeError(f"{model.__name__} has no field {', '.join(values)}")
    attnames = _plain_attnames(model)
    if attnames is None or _listened(model):
        return model(*args)
    row = model.__new__(model)
    row._state = ModelState()
    row.__dict__.update(zip(attnames, args, strict=True))
    return row


@functools.cache
def _plain_attnames(model: type[models.Model]) -> tuple[str, ...] | None:
    """The concrete fields' attnames, when ``__init__`` would store each value in the
    instance's ``__dict__`` as it is: no attribute of the class but Django's deferred ones
    (a foreign key's id sets only that, on a new instance), and no ``__init__`` of the
    model's own; else None (a file field's descriptor, say)."""
    plain = (DeferredAttribute, ForeignKeyDeferredAttribute)
    fields = _fields(model)
    if fields is None or model.__init__ is not models.Model.__init__:
        return None  # a generated field, or a constructor of the model's own
    attnames = tuple(attname for attname, _, _ in fields)
    if all(type(getattr(model, name, None)) in (*plain, type(None)) for name in attnames):
        return attnames
    return None


@functools.cache
def _fields(model: type[models.Model]) -> list[tuple[str, models.Field, Any]] | None:
    """``(attname, field, its default)`` of the concrete fields, in ``__init__``'s order
    (``_CALLED``: ``get_default`` is called for each row); None when a field is generated
    (the keyword form leaves those out)."""
    fields = model._meta.concrete_fields
    if any(getattr(field, "generated", False) for field in fields):
        return None
    return [(field.attname, field, _constant_default(field)) for field in fields]


def _constant_default(field: models.Field) -> Any:
    """``field.get_default()`` when it is the same object every time (Django's own method,
    a default that is no callable, no database default), else ``_CALLED``."""
    if type(field).get_default is not models.Field.get_default or field.has_db_default():
        return _CALLED
    if field.has_default() and callable(field.default):
        return _CALLED
    return field.get_default()


#: ``_fields``' mark of a default that ``new`` asks the field for, row by row.
_CALLED = object()


def loaded(model: type[models.Model], alias: str, values: Sequence[Any]) -> Any:
    """``model.from_db(alias, <every concrete field>, values)``: a row read from the
    database, ``values`` converted already, one per concrete field in order."""
    attnames = _plain_attnames(model)
    if (
        attnames is None
        or model.from_db.__func__ is not models.Model.from_db.__func__
        or _listened(model)
    ):
        names = [attname for attname, _, _ in _fields(model) or ()]
        return model.from_db(
            alias, names or [f.attname for f in model._meta.concrete_fields], values
        )
    row = model.__new__(model)
    state = row._state = ModelState()
    state.adding, state.db = False, alias
    row.__dict__.update(zip(attnames, values, strict=True))
    return row


def _listened(model: type[models.Model]) -> bool:
    """Whether something listens to ``model``'s ``pre_init`` or ``post_init``, which only
    ``__init__`` sends (the receivers' lists are read first: nearly always empty)."""
    return bool(pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(model) or post_init.has_listeners(model)
    )
