"""``read_attachment_tool``: the tool a model reads a long attached document with.

A document longer than the message budget reaches the model cut, with a note pointing
here; the model then reads it a slice at a time. The app supplies the storage lookup as a
``reader``: given the session (chat) id of the run and an attachment id, it returns the
``AttachmentFile`` or None when that chat has no such attachment — the reader is where
ownership is enforced, on every call. An async reader is awaited on the loop; a plain
function runs in a worker thread (wrap a Django ORM lookup in
``asgiref.sync.sync_to_async``).
"""

# No ``from __future__ import annotations``: the tool's annotations use the factory's
# ``max_length``, and ``@tool`` resolves them against the module's globals.

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeAlias

from pydantic import Field

from agent_app.attachments.content import DEFAULT_TEXT_BUDGET, READ_TOOL, AttachmentFile
from agent_app.attachments.refusals import AttachmentRefused
from agent_app.attachments.sniffing import IMAGE_TYPES
from agent_app.attachments.text import document_text
from zett_agent.tools.base import AgentTool, ToolResult, current_run_context, tool

__all__ = ["AttachmentReader", "read_attachment_tool", "reading_with"]

#: ``reader(session_id, attachment_id)`` → the attachment, or None when that chat has no
#: attachment of that id.
AttachmentReader: TypeAlias = Callable[
    [str, str], "AttachmentFile | Awaitable[AttachmentFile | None] | None"
]


def reading_with(
    reader: AttachmentReader,
) -> Callable[[str, str], Awaitable[AttachmentFile | None]]:
    """``reader`` as a coroutine function: awaited if async, else run in a worker thread."""
    if not callable(reader):
        raise TypeError(f"reader must be callable, got {reader!r}")
    is_async = inspect.iscoroutinefunction(reader) or inspect.iscoroutinefunction(
        type(reader).__call__
    )

    async def look_up(session_id: str, attachment_id: str) -> AttachmentFile | None:
        if is_async:
            return await reader(session_id, attachment_id)
        found = await asyncio.to_thread(reader, session_id, attachment_id)
        return await found if inspect.isawaitable(found) else found

    return look_up


def read_attachment_tool(
    reader: AttachmentReader, *, max_length: int = DEFAULT_TEXT_BUDGET
) -> AgentTool:
    """Build the ``read_attachment(id, start, length)`` tool over ``reader``.

    ``start`` and ``length`` count characters of the document's text; ``length`` is at most
    ``max_length``. An unknown id, an image, or a ``start`` past the end is a failed tool
    result whose text tells the model what went wrong.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    look_up = reading_with(reader)

    @tool(name=READ_TOOL)
    async def read_attachment(
        id: Annotated[str, Field(min_length=1, max_length=200)],
        start: Annotated[int, Field(ge=0)] = 0,
        length: Annotated[int, Field(ge=1, le=max_length)] = max_length,
    ) -> ToolResult:
        """Read part of the text of a file attached to this chat, to read on where a cut
        document's note says.

        Args:
            id: The attachment id given in the message the file was attached to.
            start: The first character to read, counting from 0.
            length: How many characters to read.

        Guidelines:
            - Use when an attached document was cut and you need the part not shown.
            - Continue from where the previous read ended; do not reread what you saw.
        """
        attachment = await look_up(current_run_context().session_id, id)
        if attachment is None:
            return ToolResult(f"No file with attachment id {id!r} is attached to this chat.", False)
        return await _read_slice(attachment, start, length)

    return read_attachment


async def _read_slice(attachment: AttachmentFile, start: int, length: int) -> ToolResult:
    """Characters ``start`` to ``start + length`` of a document's text, with a header."""
    if attachment.media_type in IMAGE_TYPES:
        return ToolResult(f"{attachment.name} is an image; it has no text to read.", success=False)
    try:
        document = await asyncio.to_thread(
            document_text, attachment.data, attachment.media_type, at_least=start + length + 1
        )
    except AttachmentRefused as refusal:
        return ToolResult(f"{attachment.name} could not be read: {refusal}", success=False)
    text = document.text
    if start >= len(text) and text:
        return ToolResult(
            f"start={start} is past the end: {attachment.name} has {len(text)} characters.",
            success=False,
        )
    end = min(len(text), start + length)
    total = f" of {len(text)}" if document.complete else ""
    header = f"[{attachment.name}: characters {start} to {end}{total}]"
    ends = end == len(text) and document.complete
    more = "" if ends else f"\n[More follows: continue with start={end}]"
    return ToolResult(header + "\n" + text[start:end] + more)
