"""An ``ask_user`` answer read as the answer to a form: a JSON Schema of flat fields.

An MCP server's question (elicitation) names the fields it wants in a requested schema,
but it is shown and answered as an ``ask_user`` question, so a client that knows only
``ask_user`` can answer it. ``read_answer`` is the one rule for turning an
``ask_user_response`` payload into the server's ``{action, content}``:

- ``action`` is ``accept`` (the default), ``decline`` or ``cancel``;
- with ``accept``, an object ``answer`` is the content; a text (or a list of texts)
  answers a schema of a single field, converted to that field's type (``"3"`` for an
  integer, ``"yes"``/``"no"`` for a boolean); the older ``content`` key is read too;
- the content must match the schema. ``ValueError`` says, in words, why a reply answers
  nothing; the question then stays open.

``jsonschema`` is imported when a content is checked (it comes with the ``mcp`` extra).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIONS", "options_of", "read_answer", "single_field"]

#: How a form question may be answered.
ACTIONS = ("accept", "decline", "cancel")


def single_field(schema: Any) -> str | None:
    """The one property of a schema that has exactly one, else None."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and len(properties) == 1:
        return next(iter(properties))
    return None


def options_of(schema: Any) -> list[str] | None:
    """The choices of a schema whose single field is an enum of texts, else None."""
    field = single_field(schema)
    spec = schema["properties"][field] if field is not None else None
    values = spec.get("enum") if isinstance(spec, dict) else None
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return list(values)
    return None


def _coerce(value: Any, field: Any) -> Any:
    """A text answer as the field's type (a number, an integer, a boolean); else as is."""
    kind = field.get("type") if isinstance(field, dict) else None
    if not isinstance(value, str) or kind not in ("number", "integer", "boolean"):
        return value
    text = value.strip()
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("true", "yes", "y", "1"):
            return True
        if lowered in ("false", "no", "n", "0"):
            return False
        raise ValueError(f"{text!r} is not yes or no")
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if kind == "integer":
        if not number.is_integer():
            raise ValueError(f"{text!r} is not a whole number")
        return int(number)
    return number


def read_answer(payload: dict[str, Any], schema: Any) -> dict[str, Any]:
    """The ``{action, content?}`` that ``payload`` gives a question asked with ``schema``."""
    import jsonschema

    action = payload.get("action", "accept")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if action != "accept":
        return {"action": action}
    schema = schema if isinstance(schema, dict) else {}
    answer = payload["content"] if "content" in payload else payload.get("answer")
    if not isinstance(answer, dict):
        field = single_field(schema)
        if field is None or answer is None:
            raise ValueError("the answer must be an object of the requested fields")
        try:
            answer = {field: _coerce(answer, schema["properties"][field])}
        except ValueError as error:
            raise ValueError(f"the field {field!r} does not take the answer: {error}") from None
    try:
        jsonschema.validate(answer, schema)
    except jsonschema.ValidationError as error:
        where = ".".join(str(part) for part in error.absolute_path)
        field = f"the field {where!r}: " if where else ""
        raise ValueError(f"the answer does not fit the question: {field}{error.message}") from None
    except jsonschema.SchemaError:
        raise ValueError("the requested schema is not a valid JSON Schema") from None
    return {"action": "accept", "content": answer}
