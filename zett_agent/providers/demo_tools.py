"""The demo model's use of any tool it is offered: a message that names a tool calls it.

The offline demo knows its own tools (``calculate``, ``current_time``, ``save_note``,
``ask_user``) by what people ask; every other tool an agent offers — a project's own — it
calls when the message names it: ``lookup_order 7``, ``lookup order 7`` or
``refund_order(number=7)``. So a project sees its tools run, its approvals asked and its
results reported without a key or a network.

Arguments come from the message and the tool's JSON Schema: ``name=value`` (or
``name: value``) for any parameter, a quoted value where it has spaces; then each required
parameter still missing takes, in order, the next number in the message (an integer or a
number parameter) or the words after the tool's name (a string parameter), or ``yes``/``no``
(a boolean). A call whose arguments are still incomplete is made anyway: the tool's own
validation says what is missing, and the demo reports it, as a real model would see it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from zett_agent.model import ToolDefinition

__all__ = ["named_tool_call", "offered_tools_hint"]

_PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^\s,;)]+)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
_FILLER = re.compile(r"^(?:\W|\b(?:for|about|of|on|with|to|the|a|an|please)\b)*", re.IGNORECASE)


def _name_pattern(name: str) -> re.Pattern[str]:
    """``lookup_order`` also answers to ``lookup order`` and ``lookup-order``."""
    parts = [re.escape(part) for part in name.split("_") if part]
    return re.compile(r"(?<![\w-])" + r"[\s_-]".join(parts) + r"(?![\w-])", re.IGNORECASE)


def _named(text: str, tools: Iterable[ToolDefinition]) -> tuple[ToolDefinition, int] | None:
    """The tool the text names (the earliest; the longest name at one place), and where
    its name ends."""
    found: list[tuple[int, int, ToolDefinition, int]] = []
    for tool in tools:
        match = _name_pattern(tool.name).search(text)
        if match is not None:
            found.append((match.start(), -len(tool.name), tool, match.end()))
    if not found:
        return None
    _, _, tool, end = min(found, key=lambda item: item[:2])
    return tool, end


def _kind(schema: dict[str, Any]) -> str | None:
    """The JSON type of a parameter (an optional one's ``anyOf`` included)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    for option in schema.get("anyOf") or ():
        if isinstance(option, dict) and option.get("type") not in (None, "null"):
            return option["type"]
    return None


def _converted(value: str, schema: dict[str, Any]) -> Any:
    """``value`` (text from the message) as the parameter's JSON type, where it fits."""
    kind = _kind(schema)
    text = value.strip().strip("\"'")
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return text
    if kind == "boolean":
        return text.lower() in ("yes", "true", "1", "on")
    if kind in ("array", "object"):
        try:
            return json.loads(text)
        except ValueError:
            return [text] if kind == "array" else text
    return text


def named_tool_call(
    text: str, tools: Iterable[ToolDefinition], *, skip: Iterable[str] = ()
) -> tuple[str, dict[str, Any]] | None:
    """``(tool name, arguments)`` of the tool ``text`` names, or None when it names none
    (tools in ``skip`` are never picked)."""
    skipped = set(skip)
    named = _named(text, [tool for tool in tools if tool.name not in skipped])
    if named is None:
        return None
    tool, end = named
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    rest = text[end:]
    arguments: dict[str, Any] = {}
    for key, value in _PAIR.findall(rest):
        if key in properties:
            arguments[key] = _converted(value, properties[key])
    free = _PAIR.sub(" ", rest)
    missing = [
        key
        for key in tool.parameters.get("required") or ()
        if key not in arguments and key in properties
    ]
    for key in missing:  # numbers first: what is left of the text is for the strings
        if _kind(properties[key]) in ("integer", "number"):
            number = _NUMBER.search(free)
            if number is not None:
                arguments[key] = _converted(number.group(0), properties[key])
                free = free[: number.start()] + free[number.end() :]
        elif _kind(properties[key]) == "boolean":
            arguments[key] = bool(re.search(r"\b(yes|true|on)\b", free, re.IGNORECASE))
    words = " ".join(_FILLER.sub("", free).strip(" \t\n.?!)(").split())
    for key in missing:
        if key not in arguments and _kind(properties[key]) in (None, "string") and words:
            arguments[key], words = words, ""
    return tool.name, arguments


def offered_tools_hint(tools: Iterable[ToolDefinition], *, skip: Iterable[str] = ()) -> str:
    """A line telling people which other tools the demo calls by name ("" when none)."""
    skipped = set(skip)
    names = [f"`{tool.name}`" for tool in tools if tool.name not in skipped]
    if not names:
        return ""
    example = names[0].strip("`")
    return (
        f"\n\nThis assistant also offers {', '.join(names)}: name one in your message "
        f"(e.g. *{example.replace('_', ' ')} …*, with its arguments as `name=value`) and "
        f"I will call it."
    )
