"""``AttachmentExtension``: attachment references become content parts per provider request.

A stored ``UserMessage`` names its attachments in ``attributes["attachments"]`` (a list of
ids; attributes are never sent to a provider) and holds no bytes. Around each provider
request (``on_model_request``) this extension reads those files through the app's
``reader`` and sends a copy of the request whose user messages carry the parts
(``content.attachment_parts``) for the model being called. The history the agent keeps, and
everything persisted from it, is left as it was: bytes never enter it, and the parts are
rebuilt for every call, so a chat can move to a model that sees images or one that does not.

An attachment the reader no longer finds (deleted with its chat, or never this chat's)
becomes a one-line note, and the request goes on. Building the parts (reading bytes,
extracting a PDF's text) runs in worker threads; a cancelled request stops waiting for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

from agent_app.attachments.content import (
    DEFAULT_TEXT_BUDGET,
    READ_TOOL,
    accepts_images,
    attachment_parts,
)
from agent_app.attachments.tool import AttachmentReader, reading_with
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AnyMessage, ContentPart, TextContent, UserMessage
from zett_agent.model import ModelEvent, ModelRequest

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext

__all__ = ["ATTACHMENTS_ATTRIBUTE", "AttachmentExtension"]

#: The ``UserMessage.attributes`` key that lists a message's attachment ids.
ATTACHMENTS_ATTRIBUTE = "attachments"


class AttachmentExtension(AgentExtension):
    """Send each user message's attachments to the model, read when the request is built."""

    def __init__(self, reader: AttachmentReader, *, text_budget: int = DEFAULT_TEXT_BUDGET) -> None:
        if text_budget < 1:
            raise ValueError(f"text_budget must be >= 1, got {text_budget}")
        self._look_up = reading_with(reader)
        self.text_budget = text_budget

    def on_model_request(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        """A request with no attachment is the model's stream itself: no layer per
        streamed event."""
        if not _names_attachments(request.messages):
            return call_next(request)
        return self._expanded(context, request, call_next)

    async def _expanded(
        self,
        context: AgentRunContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], AsyncIterator[ModelEvent]],
    ) -> AsyncIterator[ModelEvent]:
        images = accepts_images(context.model)
        read_tool = any(definition.name == READ_TOOL for definition in request.tools)
        messages = [
            await self._expand(context.session_id, message, images, read_tool)
            for message in request.messages
        ]
        request = dataclasses.replace(request, messages=tuple(messages))
        async with aclosing(call_next(request)) as stream:
            async for event in stream:
                yield event

    async def _expand(
        self, session_id: str, message: AnyMessage, images: bool, read_tool: bool
    ) -> AnyMessage:
        ids = _attachment_ids(message)
        if not ids:
            return message
        assert isinstance(message, UserMessage)
        content: list[ContentPart] = (
            [TextContent(message.content)]
            if isinstance(message.content, str)
            else list(message.content)
        )
        content = [part for part in content if not isinstance(part, TextContent) or part.text]
        for attachment_id in ids:
            attachment = await self._look_up(session_id, attachment_id)
            if attachment is None:
                content.append(TextContent(f"[Attachment {attachment_id} is no longer available.]"))
                continue
            content += await asyncio.to_thread(
                attachment_parts,
                attachment,
                images=images,
                text_budget=self.text_budget,
                read_tool=read_tool,
            )
        return dataclasses.replace(message, content=content)


def _names_attachments(messages: Sequence[AnyMessage]) -> bool:
    """Whether a user message of ``messages`` names an attachment.

    Asked of the whole conversation at every model call: a message with no attributes at
    all (most of them) is passed over with one test, no call.
    """
    for message in messages:
        if message.attributes and isinstance(message, UserMessage) and _attachment_ids(message):
            return True
    return False


def _attachment_ids(message: AnyMessage) -> list[str]:
    if not isinstance(message, UserMessage):
        return []
    ids = message.attributes.get(ATTACHMENTS_ATTRIBUTE)
    if not isinstance(ids, list | tuple):  # absent, or not a list of ids: nothing attached
        return []
    return [str(attachment_id) for attachment_id in ids]
