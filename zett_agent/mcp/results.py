"""From MCP to zett and back: argument checks before a call, result mapping after it.

Arguments are checked against the tool's own JSON Schema with ``jsonschema`` (the ``mcp``
package depends on it already; pydantic validates models, not arbitrary schemas) before
anything is sent, so a refused call never reaches the server.

Results are data, never instructions: text parts become the tool result's text (the model
reads them as a tool's output, nothing more), images become image parts, everything else
(audio, resource links, embedded resources) becomes a short text description. The whole
text is capped at ``max_chars``; what is cut is replaced by a marker saying how much was
cut. ``isError`` makes the tool result a failure. Structured content is kept as JSON text
when the server sent no content, and is copied into the result's attributes (for the
application, never sent to a model) when it is small enough.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import SchemaError

from zett_agent.mcp.errors import MCPToolArgumentsError
from zett_agent.messages import ContentPart, ImageBytesSource, ImageContent, TextContent
from zett_agent.tools.base import ToolResult

__all__ = ["CUT_MARKER", "ArgumentValidator", "to_tool_result"]

#: Starts the line that replaces whatever a size cap cut from a result.
CUT_MARKER = "[zett: MCP result cut"

#: The attribute that carries a result's structured content to the application.
STRUCTURED_ATTRIBUTE = "mcp_structured_content"


class ArgumentValidator:
    """Checks a tool's arguments against its input schema (built once, on first use)."""

    __slots__ = ("_schema", "_tool_name", "_validator")

    def __init__(self, tool_name: str, schema: dict[str, Any]) -> None:
        self._tool_name = tool_name
        self._schema = schema
        self._validator: Any = None

    def check(self, arguments: dict[str, Any]) -> None:
        """Raise ``MCPToolArgumentsError`` naming every problem; return when valid."""
        validator = self._validator
        if validator is None:
            cls = jsonschema.validators.validator_for(self._schema, jsonschema.Draft202012Validator)
            try:
                cls.check_schema(self._schema)
            except SchemaError as error:
                raise MCPToolArgumentsError(
                    f"Tool {self._tool_name!r} has an invalid input schema: {error.message}"
                ) from None
            validator = self._validator = cls(self._schema)
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if problems:
            described = "; ".join(
                f"{'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message}"
                for e in problems[:10]
            )
            raise MCPToolArgumentsError(
                f"Invalid arguments for tool {self._tool_name!r}: {described}"
            )


def _describe(part: Any) -> str:
    if isinstance(part, types.AudioContent):
        return f"[audio ({part.mime_type}) omitted]"
    if isinstance(part, types.ResourceLink):
        return f"[resource link: {part.uri}" + (f" ({part.name})" if part.name else "") + "]"
    if isinstance(part, types.EmbeddedResource):
        resource = part.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        return f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}) omitted]"
    return f"[{getattr(part, 'type', type(part).__name__)} content omitted]"


def _image(part: types.ImageContent, max_image_bytes: int) -> ContentPart:
    try:
        data = base64.b64decode(part.data, validate=True)
    except (binascii.Error, ValueError):
        return TextContent("[image omitted: its data is not valid base64]")
    if len(data) > max_image_bytes:
        return TextContent(
            f"[image omitted: {len(data)} bytes, more than the {max_image_bytes} allowed]"
        )
    try:
        return ImageContent(ImageBytesSource(data, part.mime_type))
    except (TypeError, ValueError) as error:
        return TextContent(f"[image omitted: {error}]")


def _cap(parts: list[ContentPart], max_chars: int) -> list[ContentPart]:
    total = sum(len(p.text) for p in parts if isinstance(p, TextContent))
    if total <= max_chars:
        return parts
    budget = max_chars
    capped: list[ContentPart] = []
    for part in parts:
        if not isinstance(part, TextContent):
            capped.append(part)
        elif budget > 0:
            capped.append(TextContent(part.text[:budget]))
            budget -= min(budget, len(part.text))
    marker = f"{CUT_MARKER}: {total} characters, the first {max_chars} are shown]"
    capped.append(TextContent(marker))
    return capped


def to_tool_result(
    result: types.CallToolResult, *, max_chars: int, max_image_bytes: int
) -> ToolResult:
    """Map one ``CallToolResult`` onto a zett ``ToolResult`` (see the module docstring)."""
    parts: list[ContentPart] = []
    for part in result.content:
        if isinstance(part, types.TextContent):
            parts.append(TextContent(part.text))
        elif isinstance(part, types.ImageContent):
            parts.append(_image(part, max_image_bytes))
        else:
            parts.append(TextContent(_describe(part)))
    structured = result.structured_content
    attributes: dict[str, Any] = {}
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        if not parts:
            parts.append(TextContent(encoded))
        if len(encoded) <= max_chars:
            attributes[STRUCTURED_ATTRIBUTE] = structured
    parts = _cap(parts, max_chars)
    if all(isinstance(p, TextContent) for p in parts):
        content: str | list[ContentPart] = "\n".join(p.text for p in parts)  # type: ignore[union-attr]
        if not content and result.is_error:
            content = "The MCP tool reported an error without a message"
    else:
        content = parts
    return ToolResult(content, success=not result.is_error, attributes=attributes)
